/* plot.h — line charts into a PNG, drawn with cairo: a figure is a title,
 * a legend and a grid of panels (one per quantity); a panel holds series
 * of (x, y) points drawn as lines with markers, on axes with ticks, tick
 * labels and axis labels. The module knows nothing of metrics.jsonl;
 * scorch-plot turns runs into figures.
 */
#ifndef SCORCH_HOST_PLOT_H
#define SCORCH_HOST_PLOT_H

#include "scorch/status.h"

typedef enum sc_plot_dash {
    SC_PLOT_SOLID,
    SC_PLOT_DASHED,
    SC_PLOT_DASH_DOT,
    SC_PLOT_DOTTED,
    SC_PLOT_DASH_COUNT,
} sc_plot_dash;

/* How a series looks, and its legend entry. */
typedef struct sc_plot_style {
    const char *label;
    int color; /* index into a ten-colour palette (wraps) */
    sc_plot_dash dash;
} sc_plot_style;

typedef struct sc_plot_series {
    int style; /* index into the figure's styles */
    const double *x, *y; /* [n]; a non-finite y breaks the line */
    int n;
} sc_plot_series;

typedef struct sc_plot_panel {
    const char *title;  /* also the y axis label */
    const char *xlabel;
    const sc_plot_series *series;
    int count;
} sc_plot_panel;

typedef struct sc_plot_figure {
    const char *title;
    const sc_plot_style *styles; /* the legend, in order */
    int style_count;
    const sc_plot_panel *panels;
    int panel_count;
    int width, height; /* pixels */
} sc_plot_figure;

/* Draws the figure and writes it to path as a PNG of width x height. */
sc_status sc_plot_write_png(const sc_plot_figure *fig, const char *path);

#endif
