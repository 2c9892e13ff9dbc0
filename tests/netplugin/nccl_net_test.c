/*
 * torchpod's test NCCL net plugin: NOT aws-ofi-nccl, and not a network.
 *
 * Written from NCCL's documented net plugin interface (NVIDIA/nccl ext-net/README.md and
 * src/include/plugin/net/net_v8.h .. net_v12.h): NCCL dlopens the plugin and looks up
 * ncclNetPlugin_v<N> for the N it supports, newest first; each is a struct whose first
 * field is the network's name and whose second is init. torchpod's tests use this file
 * where upstream's source cannot be fetched (CI has no GitHub): it exercises the same
 * loading path (the file name, dlopen with RTLD_NOW, the exported symbols, the name, the
 * libfabric.so.1 it links) that torchpod's doctor checks on a real plugin.
 *
 * init reports itself on stderr and returns ncclInternalError (3): NCCL would then skip
 * this plugin and use its internal networks. The other entry points are left NULL.
 */
#include <stdint.h>
#include <stdio.h>

#ifndef PLUGIN_NAME
#define PLUGIN_NAME "Libfabric"
#endif
#ifndef PACKAGE_STRING /* autoconf's form, as aws-ofi-nccl's config.h defines it */
#define PACKAGE_STRING "torchpod-test-net-plugin 1.0.0"
#endif
/* the package string stays in the file for `strings`-style readers (torchpod_toolkit.plugin) */
__attribute__((used)) static const char package_string[] = PACKAGE_STRING;

/* libfabric's entry points (rdma/fabric.h); linking them makes libfabric.so.1 a DT_NEEDED
 * dependency with the symbol versions of the libfabric this was built against. */
extern uint32_t fi_version(void);
extern int fi_getinfo(uint32_t version, const char *node, const char *service, uint64_t flags,
                      const void *hints, void **info);

typedef int (*entry_t)(void);

struct net_plugin {
    const char *name;          /* ncclNet_vN_t.name */
    int (*init)(void *logger); /* ncclNet_vN_t.init (its arguments differ per version) */
    entry_t rest[40];          /* devices, getProperties, listen, connect, ...: unused */
};

static int test_init(void *logger) {
    uint32_t v = fi_version();
    (void)logger;
    fprintf(stderr, "%s (%s): init with libfabric %u.%u (fi_getinfo at %p)\n",
            package_string, PLUGIN_NAME, v >> 16, v & 0xffff, (void *)&fi_getinfo);
    return 3; /* ncclInternalError: not a network */
}

#define EXPORT __attribute__((visibility("default")))
EXPORT const struct net_plugin ncclNetPlugin_v8 = {PLUGIN_NAME, test_init, {0}};
EXPORT const struct net_plugin ncclNetPlugin_v9 = {PLUGIN_NAME, test_init, {0}};
EXPORT const struct net_plugin ncclNetPlugin_v10 = {PLUGIN_NAME, test_init, {0}};
EXPORT const struct net_plugin ncclNetPlugin_v11 = {PLUGIN_NAME, test_init, {0}};
EXPORT const struct net_plugin ncclNetPlugin_v12 = {PLUGIN_NAME, test_init, {0}};
