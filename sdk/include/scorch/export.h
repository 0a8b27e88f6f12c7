/* scorch/export.h — SC_API, the mark of a function libscorch exports.
 *
 * libscorch is compiled with hidden visibility: a function is visible to
 * plugins and the host only when its declaration in a public header
 * carries SC_API. The linker's version script (sdk/libscorch.map) then
 * versions what is visible: SCORCH_1 for the public headers, SCORCH_HOST_1
 * for the host-only ones. Outside libscorch the mark expands to nothing.
 * docs/abi.md, "What libscorch exports".
 */
#ifndef SCORCH_EXPORT_H
#define SCORCH_EXPORT_H

#ifdef SC_BUILDING_LIBSCORCH
#define SC_API __attribute__((visibility("default")))
#else
#define SC_API
#endif

#endif
