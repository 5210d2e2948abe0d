/* resolve_local.c - getaddrinfo for the fuzz targets (linked with -Wl,--wrap=getaddrinfo):
 * "localhost" is resolved as usual (/etc/hosts), every other name fails at once, so fuzzed
 * traces never send a DNS query. */
#include <netdb.h>
#include <string.h>

int __real_getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
                       struct addrinfo **res);

int __wrap_getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
                       struct addrinfo **res) {
    if (node && strcmp(node, "localhost") == 0)
        return __real_getaddrinfo(node, service, hints, res);
    return EAI_NONAME;
}
