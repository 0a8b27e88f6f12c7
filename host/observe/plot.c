#include "observe/plot.h"

#include <cairo.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* Sizes are in pixels of a 1200x800 figure and scale with the figure. */
enum { REF_WIDTH = 1200, REF_HEIGHT = 800, TICKS_WANTED = 6, MARKERS_UP_TO = 60 };

/* Matplotlib's "tab10": distinct, and readable on white. */
static const double palette[10][3] = {
    {0.122, 0.467, 0.706}, {1.000, 0.498, 0.055}, {0.173, 0.627, 0.173},
    {0.839, 0.153, 0.157}, {0.580, 0.404, 0.741}, {0.549, 0.337, 0.294},
    {0.890, 0.467, 0.761}, {0.498, 0.498, 0.498}, {0.737, 0.741, 0.133},
    {0.090, 0.745, 0.812},
};

static const double pi = 3.14159265358979323846;

typedef struct box {
    double x, y, w, h;
} box;

/* The drawing state: cairo plus the figure's scale. */
typedef struct canvas {
    cairo_t *cr;
    const host_plot_figure *fig;
    double scale; /* 1 at 1200x800 */
    double font;  /* base font size */
} canvas;

/* An axis: [lo, hi] with ticks at the multiples of step inside it. */
typedef struct axis {
    double lo, hi, step;
} axis;

/* ---- text ---- */

static void set_font(const canvas *c, double size, bool bold)
{
    cairo_select_font_face(c->cr, "DejaVu Sans", CAIRO_FONT_SLANT_NORMAL,
                           bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(c->cr, size);
}

static double text_width(const canvas *c, const char *s)
{
    cairo_text_extents_t e;
    cairo_text_extents(c->cr, s, &e);
    return e.x_advance;
}

/* The current font's line height. */
static double line_height(const canvas *c)
{
    cairo_font_extents_t e;
    cairo_font_extents(c->cr, &e);
    return e.ascent + e.descent;
}

/* Draws s with (x, y) at the point of its box given by ax (0 left, 0.5
 * centre, 1 right) and ay (0 top, 0.5 middle, 1 bottom). */
static void draw_text(const canvas *c, double x, double y, double ax, double ay, const char *s)
{
    cairo_font_extents_t e;
    cairo_font_extents(c->cr, &e);
    cairo_move_to(c->cr, x - ax * text_width(c, s), y + e.ascent - ay * (e.ascent + e.descent));
    cairo_show_text(c->cr, s);
}

static void set_grey(const canvas *c, double level) { cairo_set_source_rgb(c->cr, level, level, level); }

/* ---- axes ---- */

/* 1, 2 or 5 times a power of ten, near range / target. */
static double nice_step(double range, int target)
{
    double raw = range / target;
    double magnitude = pow(10, floor(log10(raw)));
    double f = raw / magnitude;
    return (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * magnitude;
}

/* Widens an empty or degenerate range so it can be drawn. */
static void widen(double *min, double *max)
{
    if (*max > *min)
        return;
    double pad = *min != 0 ? fabs(*min) * 0.05 : 0.5;
    *min -= pad;
    *max += pad;
}

/* The data's range plus a margin, so that no marker sits on the frame;
 * integral data (epochs) gets integral ticks. */
static axis data_axis(double min, double max, bool integral)
{
    widen(&min, &max);
    double step = nice_step(max - min, TICKS_WANTED);
    if (integral && step < 1)
        step = 1;
    double margin = (max - min) * 0.05;
    return (axis){min - margin, max + margin, step};
}

/* A tick label: decimals to match the step, k and M for big numbers. */
static void format_tick(char *buf, size_t size, double v, const axis *a)
{
    double big = fmax(fabs(a->lo), fabs(a->hi));
    double unit = big >= 1e6 ? 1e6 : big >= 1e4 ? 1e3 : 1;
    const char *suffix = unit == 1e6 ? "M" : unit == 1e3 ? "k" : "";
    double step = a->step / unit;
    int decimals = step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9);
    if (fabs(v) < a->step * 1e-6)
        v = 0; /* not "-0.00" */
    snprintf(buf, size, "%.*f%s", decimals, v / unit, suffix);
}

/* The first tick of a, and how many there are. */
static int tick_count(const axis *a, double *first)
{
    *first = ceil(a->lo / a->step - 1e-9) * a->step;
    return (int)floor((a->hi - *first) / a->step + 1e-9) + 1;
}

static double widest_tick(const canvas *c, const axis *a)
{
    double first, w = 0;
    char label[32];
    int n = tick_count(a, &first);
    for (int i = 0; i < n; i++) {
        format_tick(label, sizeof label, first + i * a->step, a);
        w = fmax(w, text_width(c, label));
    }
    return w;
}

/* ---- a panel ---- */

typedef struct frame {
    box area; /* the plotting area inside the axes */
    axis x, y;
} frame;

static double to_px(const frame *f, double x) { return f->area.x + (x - f->x.lo) / (f->x.hi - f->x.lo) * f->area.w; }
static double to_py(const frame *f, double y) { return f->area.y + f->area.h - (y - f->y.lo) / (f->y.hi - f->y.lo) * f->area.h; }

/* The range of the panel's finite points; false when it has none. */
static bool data_range(const host_plot_panel *p, double *x0, double *x1, double *y0, double *y1,
                       bool *integral)
{
    bool any = false;
    *integral = true;
    for (int s = 0; s < p->count; s++)
        for (int i = 0; i < p->series[s].n; i++) {
            double x = p->series[s].x[i], y = p->series[s].y[i];
            if (!isfinite(x) || !isfinite(y))
                continue;
            *x0 = any ? fmin(*x0, x) : x;
            *x1 = any ? fmax(*x1, x) : x;
            *y0 = any ? fmin(*y0, y) : y;
            *y1 = any ? fmax(*y1, y) : y;
            *integral = *integral && x == floor(x);
            any = true;
        }
    return any;
}

static void draw_frame(const canvas *c, const frame *f)
{
    set_grey(c, 0.3);
    cairo_set_line_width(c->cr, 1);
    cairo_rectangle(c->cr, f->area.x + 0.5, f->area.y + 0.5, f->area.w - 1, f->area.h - 1);
    cairo_stroke(c->cr);
}

static void draw_grid_and_ticks(const canvas *c, const frame *f)
{
    cairo_t *cr = c->cr;
    char label[32];
    double first, pad = 6 * c->scale;
    set_font(c, c->font * 0.85, false);
    cairo_set_line_width(cr, 1);
    int n = tick_count(&f->y, &first);
    for (int i = 0; i < n; i++) {
        double v = first + i * f->y.step, py = round(to_py(f, v)) + 0.5;
        set_grey(c, 0.9);
        cairo_move_to(cr, f->area.x, py);
        cairo_line_to(cr, f->area.x + f->area.w, py);
        cairo_stroke(cr);
        set_grey(c, 0.2);
        format_tick(label, sizeof label, v, &f->y);
        draw_text(c, f->area.x - pad, py, 1, 0.5, label);
    }
    n = tick_count(&f->x, &first);
    for (int i = 0; i < n; i++) {
        double v = first + i * f->x.step, px = round(to_px(f, v)) + 0.5;
        set_grey(c, 0.9);
        cairo_move_to(cr, px, f->area.y);
        cairo_line_to(cr, px, f->area.y + f->area.h);
        cairo_stroke(cr);
        set_grey(c, 0.2);
        format_tick(label, sizeof label, v, &f->x);
        draw_text(c, px, f->area.y + f->area.h + pad, 0.5, 0, label);
    }
    draw_frame(c, f);
}

static void set_style(const canvas *c, const host_plot_style *st)
{
    const double *rgb = palette[(st->color % 10 + 10) % 10];
    double u = c->scale * 2;
    const double dashes[HOST_PLOT_DASH_COUNT][4] = {
        [HOST_PLOT_DASHED] = {4 * u, 2.5 * u},
        [HOST_PLOT_DASH_DOT] = {4 * u, 1.5 * u, 1 * u, 1.5 * u},
        [HOST_PLOT_DOTTED] = {1 * u, 1.5 * u},
    };
    static const int dash_len[HOST_PLOT_DASH_COUNT] = {0, 2, 4, 2};
    host_plot_dash dash = st->dash == HOST_PLOT_POINTS ? HOST_PLOT_SOLID : st->dash;
    cairo_set_source_rgb(c->cr, rgb[0], rgb[1], rgb[2]);
    cairo_set_line_width(c->cr, u);
    cairo_set_dash(c->cr, dashes[dash], dash_len[dash], 0);
}

static void draw_marker(const canvas *c, double x, double y)
{
    cairo_new_sub_path(c->cr);
    cairo_arc(c->cr, x, y, 3.2 * c->scale, 0, 2 * pi);
    cairo_fill(c->cr);
}

static void draw_series(const canvas *c, const frame *f, const host_plot_series *s)
{
    cairo_t *cr = c->cr;
    const host_plot_style *style = &c->fig->styles[s->style];
    set_style(c, style);
    bool drawing = false;
    for (int i = 0; i < s->n && style->dash != HOST_PLOT_POINTS; i++) {
        if (!isfinite(s->y[i]) || !isfinite(s->x[i])) {
            drawing = false;
            continue;
        }
        double px = to_px(f, s->x[i]), py = to_py(f, s->y[i]);
        if (drawing)
            cairo_line_to(cr, px, py);
        else
            cairo_move_to(cr, px, py);
        drawing = true;
    }
    cairo_stroke(cr);
    if (s->n > MARKERS_UP_TO && style->dash != HOST_PLOT_POINTS)
        return;
    for (int i = 0; i < s->n; i++)
        if (isfinite(s->y[i]) && isfinite(s->x[i]))
            draw_marker(c, to_px(f, s->x[i]), to_py(f, s->y[i]));
}

/* The panel's axes; *has_data is false when no point is finite. */
static frame panel_axes(const host_plot_panel *p, bool *has_data)
{
    double x0 = 0, x1 = 0, y0 = 0, y1 = 0;
    bool integral;
    *has_data = data_range(p, &x0, &x1, &y0, &y1, &integral);
    return (frame){.x = data_axis(x0, x1, integral), .y = data_axis(y0, y1, false)};
}

/* Room left of a panel's frame: the y axis label and tick labels. */
static double left_room(const canvas *c, const host_plot_panel *p)
{
    bool has_data;
    frame f = panel_axes(p, &has_data);
    set_font(c, c->font * 0.85, false);
    double ticks = widest_tick(c, &f.y);
    set_font(c, c->font, false);
    return line_height(c) + ticks + 16 * c->scale;
}

/* The panel's frame inside cell, `left` from its left edge, with room
 * for the title above and the tick and axis labels below. */
static frame fit_frame(const canvas *c, const host_plot_panel *p, box cell, double left,
                       bool *has_data)
{
    frame f = panel_axes(p, has_data);
    double pad = 8 * c->scale;
    set_font(c, c->font * 0.85, false);
    double tick_h = line_height(c);
    set_font(c, c->font, false);
    double label_h = line_height(c);
    set_font(c, c->font * 1.1, true);
    double top = line_height(c) + pad, bottom = tick_h + label_h + 2 * pad;
    f.area = (box){cell.x + left, cell.y + top, cell.w - left - 2 * pad, cell.h - top - bottom};
    return f;
}

/* The title above the frame, the x label below it, the y label (the title
 * again) turned along the left edge. */
static void draw_labels(const canvas *c, const host_plot_panel *p, const frame *f, box cell)
{
    double centre = f->area.x + f->area.w / 2;
    set_grey(c, 0.1);
    set_font(c, c->font * 1.1, true);
    draw_text(c, centre, cell.y, 0.5, 0, p->title);
    set_font(c, c->font, false);
    draw_text(c, centre, cell.y + cell.h, 0.5, 1, p->xlabel);
    cairo_save(c->cr);
    cairo_translate(c->cr, cell.x, f->area.y + f->area.h / 2);
    cairo_rotate(c->cr, -pi / 2);
    draw_text(c, 0, 0, 0.5, 0, p->title);
    cairo_restore(c->cr);
}

static void draw_panel(const canvas *c, const host_plot_panel *p, box cell, double left)
{
    cairo_t *cr = c->cr;
    bool has_data;
    frame f = fit_frame(c, p, cell, left, &has_data);
    if (has_data)
        draw_grid_and_ticks(c, &f);
    else
        draw_frame(c, &f);
    draw_labels(c, p, &f, cell);
    if (!has_data) {
        set_grey(c, 0.5);
        draw_text(c, f.area.x + f.area.w / 2, f.area.y + f.area.h / 2, 0.5, 0.5, "no data");
        return;
    }
    cairo_save(cr);
    cairo_rectangle(cr, f.area.x, f.area.y, f.area.w, f.area.h);
    cairo_clip(cr);
    for (int s = 0; s < p->count; s++)
        draw_series(c, &f, &p->series[s]);
    cairo_restore(cr);
}

/* ---- the figure ---- */

/* The columns of the panel grid whose cells come nearest to 3:2. */
static int grid_columns(int panels, box area)
{
    int best = 1;
    double best_err = INFINITY;
    for (int cols = 1; cols <= panels; cols++) {
        int rows = (panels + cols - 1) / cols;
        double aspect = (area.w / cols) / (area.h / rows);
        double err = fabs(log(aspect / 1.5));
        if (err < best_err) {
            best_err = err;
            best = cols;
        }
    }
    return best;
}

static double legend_entry_width(const canvas *c, const host_plot_style *st)
{
    return 48 * c->scale + text_width(c, st->label) + 24 * c->scale;
}

/* Draws styles [from, to), `width` wide in all, as a centred row at cy. */
static void legend_row(const canvas *c, int from, int to, double width, double cy)
{
    double x = (c->fig->width - width) / 2;
    for (int i = from; i < to; i++) {
        set_style(c, &c->fig->styles[i]);
        if (c->fig->styles[i].dash != HOST_PLOT_POINTS) {
            cairo_move_to(c->cr, x, cy);
            cairo_line_to(c->cr, x + 40 * c->scale, cy);
            cairo_stroke(c->cr);
        }
        draw_marker(c, x + 20 * c->scale, cy);
        set_grey(c, 0.1);
        draw_text(c, x + 48 * c->scale, cy, 0, 0.5, c->fig->styles[i].label);
        x += legend_entry_width(c, &c->fig->styles[i]);
    }
    cairo_set_dash(c->cr, NULL, 0, 0);
}

/* Draws the legend in as many rows as it needs from y; returns its height. */
static double draw_legend(const canvas *c, double y)
{
    const host_plot_figure *fig = c->fig;
    double room = fig->width - 40 * c->scale, row_h = c->font * 1.7;
    set_font(c, c->font, false);
    int rows = 0;
    for (int i = 0, end; i < fig->style_count; i = end, rows++) {
        double w = 0;
        for (end = i; end < fig->style_count &&
                      (end == i || w + legend_entry_width(c, &fig->styles[end]) <= room);
             end++)
            w += legend_entry_width(c, &fig->styles[end]);
        legend_row(c, i, end, w, y + rows * row_h + row_h / 2);
    }
    return rows * row_h;
}

static void draw_figure(const canvas *c)
{
    const host_plot_figure *fig = c->fig;
    double margin = 16 * c->scale;
    cairo_set_source_rgb(c->cr, 1, 1, 1);
    cairo_paint(c->cr);
    set_grey(c, 0.1);
    set_font(c, c->font * 1.3, true);
    draw_text(c, fig->width / 2.0, margin, 0.5, 0, fig->title);
    double y = margin + line_height(c) + margin / 2;
    y += draw_legend(c, y) + margin / 2;
    box area = {margin, y, fig->width - 2 * margin, fig->height - y - margin};
    int cols = grid_columns(fig->panel_count, area);
    int rows = (fig->panel_count + cols - 1) / cols;
    double cw = area.w / cols, ch = area.h / rows, left = 0;
    for (int i = 0; i < fig->panel_count; i++) /* the same for all: frames line up */
        left = fmax(left, left_room(c, &fig->panels[i]));
    for (int i = 0; i < fig->panel_count; i++) {
        box cell = {area.x + (i % cols) * cw, area.y + (i / cols) * ch, cw, ch};
        cell.x += margin / 2;
        cell.w -= margin;
        cell.h -= margin / 2;
        draw_panel(c, &fig->panels[i], cell, left);
    }
}

sc_status host_plot_write_png(const host_plot_figure *fig, const char *path)
{
    cairo_surface_t *surface =
        cairo_image_surface_create(CAIRO_FORMAT_RGB24, fig->width, fig->height);
    cairo_t *cr = cairo_create(surface);
    /* Text and lines grow with the area; below 0.6 they would be unreadable. */
    double scale = fmax(sqrt((double)fig->width / REF_WIDTH * fig->height / REF_HEIGHT), 0.6);
    canvas c = {.cr = cr, .fig = fig, .scale = scale, .font = 14 * scale};
    cairo_status_t cs = cairo_status(cr);
    if (cs == CAIRO_STATUS_SUCCESS) {
        draw_figure(&c);
        cs = cairo_status(cr);
    }
    cairo_destroy(cr);
    if (cs == CAIRO_STATUS_SUCCESS)
        cs = cairo_surface_write_to_png(surface, path);
    cairo_surface_destroy(surface);
    if (cs == CAIRO_STATUS_WRITE_ERROR) /* errno is fopen's or fwrite's */
        return sc_error_set(SC_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    if (cs != CAIRO_STATUS_SUCCESS)
        return sc_error_set(SC_ERR_IO, "cannot draw %s: %s", path, cairo_status_to_string(cs));
    return SC_OK;
}
