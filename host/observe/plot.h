/* plot.h — line charts into a PNG, drawn with cairo: a figure is a title,
 * a legend and a grid of panels (one per quantity); a panel holds series
 * of (x, y) points drawn as lines with markers, on axes with ticks, tick
 * labels and axis labels. The module knows nothing of metrics.jsonl;
 * scorch-plot turns runs into figures.
 */
#ifndef SCORCH_HOST_PLOT_H
#define SCORCH_HOST_PLOT_H

#include "scorch/status.h"

typedef enum host_plot_dash {
    HOST_PLOT_SOLID,
    HOST_PLOT_DASHED,
    HOST_PLOT_DASH_DOT,
    HOST_PLOT_DOTTED,
    HOST_PLOT_DASH_COUNT,
    HOST_PLOT_POINTS = HOST_PLOT_DASH_COUNT, /* markers only, every one, no line: a scatter */
} host_plot_dash;

/* How a series looks, and its legend entry. */
typedef struct host_plot_style {
    const char *label;
    int color; /* index into a ten-colour palette (wraps) */
    host_plot_dash dash;
} host_plot_style;

typedef struct host_plot_series {
    int style; /* index into the figure's styles */
    const double *x, *y; /* [n]; a non-finite y breaks the line */
    int n;
} host_plot_series;

typedef struct host_plot_panel {
    const char *title;  /* also the y axis label */
    const char *xlabel;
    const host_plot_series *series;
    int count;
} host_plot_panel;

typedef struct host_plot_figure {
    const char *title;
    const host_plot_style *styles; /* the legend, in order */
    int style_count;
    const host_plot_panel *panels;
    int panel_count;
    int width, height; /* pixels */
} host_plot_figure;

/* Draws the figure and writes it to path as a PNG of width x height. */
sc_status host_plot_write_png(const host_plot_figure *fig, const char *path);

#endif
