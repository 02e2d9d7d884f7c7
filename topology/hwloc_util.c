/* Loading an hwloc topology with I/O objects and without GPU-runtime plugins.
 *
 * An XML file is untrusted input, and hwloc's XML importer trusts it: hwloc 2.9 asserts or
 * crashes on a mangled cpuset (a PU with complete_cpuset=",0x00001000" aborts in
 * hwloc_bitmap_sscanf). So a file is read once here (a regular file, size capped), loaded first
 * in a forked child, and only if the child came through is it loaded in this process: a crash
 * in the importer becomes a message naming the file, not the end of the job. */
#include "topology/hwloc_util.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cl/base/infile.h"

#define XML_MAX ((uint64_t)256 << 20)

enum { TRIAL_OK = 0, TRIAL_INIT = 3, TRIAL_SET = 4, TRIAL_LOAD = 5, TRIAL_TIME_S = 120 };

static void configure(hwloc_topology_t topo, int keep_io)
{
	static const char *const off[] = {"opencl", "cuda", "nvml", "rsmi", "levelzero", "gl"};

	for (size_t i = 0; i < sizeof(off) / sizeof(off[0]); i++)
		hwloc_topology_set_components(topo, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST,
					      off[i]);
	if (keep_io)
		hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_ALL);
}

/* In the child: load the buffer and say how it went by the exit status (never returns). */
static void trial_child(const char *xml, size_t n, int keep_io)
{
	hwloc_topology_t topo;
	int null = open("/dev/null", O_WRONLY);

	if (null >= 0) { /* hwloc's and a sanitizer's reports would only repeat the parent's */
		dup2(null, 1);
		dup2(null, 2);
	}
	alarm(TRIAL_TIME_S);
	if (hwloc_topology_init(&topo) != 0)
		_exit(TRIAL_INIT);
	configure(topo, keep_io);
	if (hwloc_topology_set_xmlbuffer(topo, xml, (int)n + 1) != 0)
		_exit(TRIAL_SET);
	if (hwloc_topology_load(topo) != 0)
		_exit(TRIAL_LOAD);
	_exit(TRIAL_OK);
}

static clp_status trial_load(const char *path, const char *xml, size_t n, int keep_io)
{
	int status;
	pid_t pid, w;

	fflush(NULL); /* nothing buffered may be written twice */
	pid = fork();
	if (pid < 0)
		return clp_error(CLP_ERR_IO, "topology file %s: cannot fork to check it: %s", path,
				 strerror(errno));
	if (pid == 0)
		trial_child(xml, n, keep_io);
	while ((w = waitpid(pid, &status, 0)) < 0 && errno == EINTR)
		;
	if (w < 0)
		return clp_error(CLP_ERR_IO, "topology file %s: lost the child checking it: %s",
				 path, strerror(errno));
	if (WIFSIGNALED(status))
		return clp_error(CLP_ERR_FORMAT, "topology file %s: hwloc's XML importer crashed on "
				 "it (signal %d, %s): the file is damaged", path, WTERMSIG(status),
				 WTERMSIG(status) == SIGALRM ? "no answer in 120 s"
							     : strsignal(WTERMSIG(status)));
	if (WIFEXITED(status) && WEXITSTATUS(status) != TRIAL_OK &&
	    WEXITSTATUS(status) != TRIAL_INIT && WEXITSTATUS(status) != TRIAL_SET &&
	    WEXITSTATUS(status) != TRIAL_LOAD) /* a sanitizer's report exits with its own code */
		return clp_error(CLP_ERR_FORMAT, "topology file %s: hwloc's XML importer failed on "
				 "it (exit %d): the file is damaged", path, WEXITSTATUS(status));
	return CLP_OK; /* hwloc's own errors are reported by the load in this process */
}

clp_status clp_topo_hwloc_load(const char *xml_path, int keep_io, hwloc_topology_t *out)
{
	hwloc_topology_t topo;
	char *xml = NULL;
	size_t n = 0;
	clp_status s;

	*out = NULL;
	if (xml_path) {
		CLP_TRY(clp_infile_read("topology file", xml_path, XML_MAX, &xml, &n));
		if (!n || memchr(xml, '\0', n)) {
			free(xml);
			return clp_error(CLP_ERR_FORMAT, "topology file %s: %s (not an hwloc XML "
					 "file)", xml_path, n ? "contains NUL bytes" : "empty");
		}
		s = trial_load(xml_path, xml, n, keep_io);
		if (s != CLP_OK) {
			free(xml);
			return s;
		}
	}
	if (hwloc_topology_init(&topo) != 0) {
		free(xml);
		return clp_error(CLP_ERR_NOMEM, "hwloc_topology_init failed: %s", strerror(errno));
	}
	configure(topo, keep_io);
	if (xml && hwloc_topology_set_xmlbuffer(topo, xml, (int)n + 1) != 0) {
		int e = errno;

		hwloc_topology_destroy(topo);
		free(xml);
		return clp_error(CLP_ERR_FORMAT, "topology '%s' is not an hwloc XML file hwloc can "
				 "read (%s)", xml_path, strerror(e));
	}
	if (hwloc_topology_load(topo) != 0) {
		int e = errno;

		hwloc_topology_destroy(topo);
		free(xml);
		return clp_error(xml_path ? CLP_ERR_FORMAT : CLP_ERR_UNSUPPORTED,
				 "hwloc could not load %s%s (%s)", xml_path ? "topology " : "",
				 xml_path ? xml_path : "this machine's topology", strerror(e));
	}
	free(xml);
	*out = topo;
	return CLP_OK;
}
