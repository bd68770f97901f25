/* What one `cpuid` instruction costs on this machine (`make bench`, x86_64 only).
 *
 * Under a hypervisor `cpuid` traps to it; on some virtual machines that costs
 * microseconds, and every program's start runs a few (glibc's ld.so dozens, OpenSSL's
 * constructor six), so on such a machine cold starts are measured in cpuid calls.
 * bench/cold-start-profile.md, "Sixth pass", counts them per program. */
#include <stdio.h>
#include <time.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

int main(void)
{
#if defined(__x86_64__)
    enum { N = 2000 };
    unsigned a, b, c, d, sink = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < N; i++) {
        __cpuid_count(7, 0, a, b, c, d);
        sink ^= a ^ b ^ c ^ d;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ns = (t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec);
    printf("one cpuid instruction (leaf 7, %d in a row)   %.2f us%s\n", N, ns / N / 1000.0,
           sink == 0xffffffffu ? " " : "");
#else
    printf("one cpuid instruction: not x86_64, not measured\n");
#endif
    return 0;
}
