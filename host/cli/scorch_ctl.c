/* scorch-ctl: steers a running scorch-train through RUN_DIR/control.sock.
 * The protocol is in control.h, the commands in docs/hooks.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/control.h"

enum { EXIT_FAILED = 1, EXIT_USAGE = 2 };

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: scorch-ctl RUN_DIR COMMAND [ARGS]\n\n"
            "Steers the scorch-train that runs in RUN_DIR, through RUN_DIR/control.sock.\n\n"
            "Commands:\n"
            "  status                 epoch, phase, batch, step, lr, last loss, samples/s, "
            "paused?\n"
            "  pause, resume          hold the training at a batch boundary, and go on\n"
            "  save                   write a checkpoint now\n"
            "  validate, test         run an extra valid / test pass now\n"
            "  set-lr X               set the base learning rate from the next step\n"
            "  stop                   write a checkpoint and end the run (exit 0)\n"
            "  call NAME [k=v,...]    call a plugin's user function, print its text\n\n"
            "Exit status: 0 when the run answers ok, 1 when it answers an error or cannot\n"
            "be reached, 2 for a usage error. See docs/hooks.md.\n");
}

/* argv[from..argc) joined by spaces: the request line. */
static char *join(int argc, char **argv, int from)
{
    size_t len = 1;
    for (int i = from; i < argc; i++)
        len += strlen(argv[i]) + 1;
    char *line = malloc(len);
    if (!line)
        return NULL;
    line[0] = '\0';
    for (int i = from; i < argc; i++) {
        if (strpbrk(argv[i], "\r\n")) {
            free(line);
            return NULL;
        }
        strcat(line, argv[i]);
        if (i + 1 < argc)
            strcat(line, " ");
    }
    return line;
}

/* Prints the answer ("ok TEXT" or "error TEXT"); its exit status. */
static int print_answer(const char *reply)
{
    if (strncmp(reply, "ok ", 3) == 0) {
        fputs(reply + 3, stdout);
        return 0;
    }
    if (strncmp(reply, "error ", 6) == 0)
        fprintf(stderr, "scorch-ctl: %s", reply + 6);
    else
        fprintf(stderr, "scorch-ctl: the run gave no answer%s%s", reply[0] ? ": " : "\n",
                reply);
    return EXIT_FAILED;
}

int main(int argc, char **argv)
{
    if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        usage(stdout);
        return 0;
    }
    if (argc < 3) {
        usage(stderr);
        return EXIT_USAGE;
    }
    char *line = join(argc, argv, 2);
    if (!line) {
        fprintf(stderr, "scorch-ctl: arguments may not hold line breaks\n");
        return EXIT_USAGE;
    }
    char *reply = NULL;
    sc_status st = host_control_send(argv[1], line, &reply);
    free(line);
    if (st != SC_OK) {
        fprintf(stderr, "scorch-ctl: %s\n", sc_error_message());
        return EXIT_FAILED;
    }
    int code = print_answer(reply);
    free(reply);
    return code;
}
