/* Rooflines of several devices on one log-log plot (clpipe bench --compare --svg): per device a
 * line min(peak GFLOP/s, peak GB/s x intensity), and kernels placed on it at (flops / bytes,
 * flops / seconds), coloured by the device they ran on. A device or kernel whose figures are
 * missing, zero, negative or not finite is left out of the plot (and named in a note). */
#ifndef CLP_TOPO_ROOFLINE_SVG_H
#define CLP_TOPO_ROOFLINE_SVG_H

#include "cl/base/status.h"

typedef struct clp_roof_device {
	const char *name;
	double peak_gflops; /* measured compute peak, GFLOP/s */
	double peak_gbps;   /* measured bandwidth peak, GB/s */
} clp_roof_device;

typedef struct clp_roof_point {
	const char *label;
	int device; /* index into the devices */
	double flops, bytes, seconds; /* per call */
} clp_roof_point;

/* The SVG text (malloc'ed), or NULL when out of host memory. */
char *clp_roofline_svg(const char *title, const clp_roof_device *dev, int ndev,
		       const clp_roof_point *pts, int npts);
/* The same, written durably to path. */
clp_status clp_roofline_write(const char *path, const char *title, const clp_roof_device *dev,
			      int ndev, const clp_roof_point *pts, int npts);

#endif
