/* clp_cl_caps_decide (cl/caps.c): the kernel shape and slow_fma of the implementations known
 * here come from the table, whatever a probe measured (a loaded host's timings cannot flip
 * them); an unknown device follows its timings with their margins (1.25 for the shape, 4 for
 * fma), and without a probe its type. No device is touched. */
#include <stdio.h>
#include <string.h>

#include "cl/runtime.h"
#include "tests/harness.h"

static clp_cl_devinfo dev(const char *platform, const char *name, const char *type)
{
	clp_cl_devinfo d;

	memset(&d, 0, sizeof(d));
	snprintf(d.platform, sizeof(d.platform), "%s", platform);
	snprintf(d.name, sizeof(d.name), "%s", name);
	snprintf(d.type, sizeof(d.type), "%s", type);
	return d;
}

/* timings: axpy CPU shape / GPU shape, fma / mad chains (ms); probed 0 for none */
static clp_cl_caps timed(int probed, double wg1, double wide, double fma, double mad)
{
	clp_cl_caps c;

	memset(&c, 0, sizeof(c));
	c.probed = probed;
	c.wg1_ms = wg1, c.wide_ms = wide, c.fma_ms = fma, c.mad_ms = mad;
	return c;
}

static void expect(const char *what, const clp_cl_devinfo *d, clp_cl_caps c, int gpu, int slow,
		   const char *by)
{
	const char *r = clp_cl_caps_decide(d, &c);

	CHECK(c.wide_groups == gpu && c.slow_fma == slow && strcmp(r, by) == 0 &&
		      strcmp(c.decided_by, by) == 0,
	      "%s: shape %s slow_fma %d by \"%s\", want %s %d by \"%s\"", what,
	      c.wide_groups ? "gpu" : "cpu", c.slow_fma, r, gpu ? "gpu" : "cpu", slow, by);
}

static void test_table(void)
{
	const clp_cl_devinfo rusticl = dev("rusticl", "llvmpipe (LLVM 15.0.6, 256 bits)", "cpu"),
			     clover = dev("Clover", "llvmpipe (LLVM 15.0.6, 256 bits)", "cpu"),
			     pocl = dev("Portable Computing Language",
					"pthread-skylake-avx512-AMD EPYC", "cpu"),
			     intel = dev("Intel(R) OpenCL", "AMD EPYC", "cpu");

	/* the figures of cl.devices_caps on this host (loaded 2-core VM) */
	expect("rusticl", &rusticl, timed(1, 9.05, 3.44, 11.1, 0.92), 1, 1, "table: llvmpipe");
	expect("clover", &clover, timed(1, 9.05, 3.44, 11.1, 0.92), 1, 1, "table: llvmpipe");
	expect("pocl", &pocl, timed(1, 0.078, 0.155, 1.95, 3.13), 0, 0, "table: pocl-cpu");
	expect("intel", &intel, timed(1, 0.30, 0.71, 0.147, 0.146), 0, 0, "table: intel-cpu");
	/* a loaded moment: both shapes alike, fma() no slower (the CI failure's kind) */
	expect("rusticl loaded", &rusticl, timed(1, 20.0, 19.0, 2.0, 1.9), 1, 1, "table: llvmpipe");
	expect("rusticl CPU shape faster", &rusticl, timed(1, 5.0, 30.0, 1.0, 1.0), 1, 1,
	       "table: llvmpipe");
	expect("pocl GPU shape faster", &pocl, timed(1, 1.0, 0.2, 40.0, 1.0), 0, 0,
	       "table: pocl-cpu");
	expect("intel GPU shape faster", &intel, timed(1, 13.0, 4.0, 1.0, 1.0), 0, 0,
	       "table: intel-cpu");
	/* no probe (a failed one): the table still decides */
	expect("rusticl unprobed", &rusticl, timed(0, 0, 0, 0, 0), 1, 1, "table: llvmpipe");
	expect("pocl unprobed", &pocl, timed(0, 0, 0, 0, 0), 0, 0, "table: pocl-cpu");
}

static void test_unknown(void)
{
	const clp_cl_devinfo cpu = dev("Some CL", "some cpu", "cpu"),
			     gpu = dev("Some CL", "some gpu", "gpu"),
			     pocl_gpu = dev("Portable Computing Language", "NVIDIA H200", "gpu");

	/* a CPU keeps the CPU shape unless the GPU shape is 1.25x faster */
	expect("cpu 1.30x", &cpu, timed(1, 1.30, 1.0, 1, 1), 1, 0, "probe");
	expect("cpu 1.20x", &cpu, timed(1, 1.20, 1.0, 1, 1), 0, 0, "probe");
	expect("cpu CPU shape faster", &cpu, timed(1, 0.5, 1.0, 1, 1), 0, 0, "probe");
	/* a GPU keeps the GPU shape unless the CPU shape is 1.25x faster */
	expect("gpu 1.30x", &gpu, timed(1, 1.0, 1.30, 1, 1), 0, 0, "probe");
	expect("gpu 1.20x", &gpu, timed(1, 1.0, 1.20, 1, 1), 1, 0, "probe");
	/* PoCL's GPU drivers are not its CPU device: the probe decides */
	expect("pocl gpu", &pocl_gpu, timed(1, 1.0, 1.0, 1, 1), 1, 0, "probe");
	/* fma() over 4x mad() */
	expect("fma 4.1x", &gpu, timed(1, 1, 1, 4.1, 1.0), 1, 1, "probe");
	expect("fma 3.9x", &gpu, timed(1, 1, 1, 3.9, 1.0), 1, 0, "probe");
	/* no probe: the type */
	expect("cpu unprobed", &cpu, timed(0, 0, 0, 0, 0), 0, 0, "device type");
	expect("gpu unprobed", &gpu, timed(0, 0, 0, 0, 0), 1, 0, "device type");
}

TH_MAIN(TH_TEST(test_table), TH_TEST(test_unknown))
