/*
 * A stand-in libfabric.so.1 for torchpod's tests: NOT libfabric. It exports the two entry
 * points the test plugin links, with libfabric's symbol versioning (FABRIC_1.x nodes, as
 * the real library's libfabric.map does), so a plugin linked against a newer ABI fails to
 * load against an older one exactly as with the real library:
 *   "version `FABRIC_1.7' not found (required by libnccl-net.so)".
 * Built with -DFI_MINOR=N and a version script whose newest node is FABRIC_1.N (see
 * tests/netplugin_build.py). The real ABI history is longer; these two nodes model it.
 */
#include <stdint.h>

#ifndef FI_MINOR
#define FI_MINOR 17
#endif

uint32_t fi_version(void) { return (1u << 16) | FI_MINOR; }

int fi_getinfo_compat(uint32_t version, const char *node, const char *service, uint64_t flags,
                      const void *hints, void **info) {
    (void)version; (void)node; (void)service; (void)flags; (void)hints;
    if (info) *info = 0;
    return -61; /* -FI_ENODATA: no provider here */
}
#ifdef NEW_ABI
/* the newest node carries the default version; the older one stays for old binaries */
__asm__(".symver fi_getinfo_compat, fi_getinfo@FABRIC_1.6");
__asm__(".symver fi_getinfo_new, fi_getinfo@@FABRIC_1.7");
int fi_getinfo_new(uint32_t version, const char *node, const char *service, uint64_t flags,
                   const void *hints, void **info) {
    return fi_getinfo_compat(version, node, service, flags, hints, info);
}
#else
__asm__(".symver fi_getinfo_compat, fi_getinfo@@FABRIC_1.6");
#endif
