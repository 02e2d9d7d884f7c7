/* Step lines and the terminal status line (see progress.h). */
#include "engine/train/progress.h"

#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

void clp_progress_time(double sec, char *buf, size_t n)
{
	long t = sec > 0 && sec < 1e9 ? (long)(sec + 0.5) : 0;

	if (t >= 3600)
		snprintf(buf, n, "%ldh%02ldm", t / 3600, t / 60 % 60);
	else
		snprintf(buf, n, "%ldm%02lds", t / 60, t % 60);
}

void clp_progress_format(char *buf, size_t n, const clp_progress *p, int width)
{
	char eta[32], line[512], scale[48] = "";
	int len, bar = 20, done;

	if (n == 0)
		return;
	clp_progress_time(p->eta_s, eta, sizeof(eta));
	if (p->scale > 0)
		snprintf(scale, sizeof(scale), " | loss scale %g", p->scale);
	if (width <= 0) {
		snprintf(buf, n, "step %ld/%ld | loss %.4f | lr %.2e | norm %.3f | %.0f tok/s | "
			 "%.0f ms/step | ETA %s%s%s\n", p->step, p->steps, p->loss, p->lr, p->norm,
			 p->tok_s, p->ms, eta,
			 p->skipped ? " | non-finite gradient: step skipped" : "", scale);
		return;
	}
	if (width < 70) /* a narrow terminal: the numbers matter more than the bar */
		bar = 0;
	done = p->steps > 0 ? (int)((double)bar * (double)p->step / (double)p->steps) : 0;
	done = done < 0 ? 0 : done > bar ? bar : done;
	len = 0;
	if (bar)
		len = snprintf(line, sizeof(line), "[%.*s%*s] ", done, "====================",
			       bar - done, "");
	len += snprintf(line + len, sizeof(line) - (size_t)len, "step %ld/%ld | loss %.4f | %.0f "
			"tok/s | ETA %s%s%s", p->step, p->steps, p->loss, p->tok_s, eta,
			p->skipped ? " | step skipped" : "", scale);
	if (len < 0)
		len = 0;
	if (len > (int)sizeof(line) - 1)
		len = (int)sizeof(line) - 1;
	if (len > width - 1) /* cut rather than wrap: a wrapped line cannot be rewritten */
		len = width - 1 > 0 ? width - 1 : 0;
	snprintf(buf, n, "\r%.*s%*s", len, line, width - 1 - len, "");
}

int clp_progress_width(FILE *out)
{
	struct winsize w;
	int fd = fileno(out);

	if (fd < 0 || !isatty(fd))
		return 0;
	if (ioctl(fd, TIOCGWINSZ, &w) == 0 && w.ws_col > 0)
		return w.ws_col;
	return 80;
}

void clp_progress_clear(FILE *out, int width)
{
	if (width <= 0)
		return;
	fprintf(out, "\r%*s\r", width - 1, "");
}
