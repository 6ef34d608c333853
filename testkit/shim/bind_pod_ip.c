/*
 * Makes a pod's process bind its own pod IP where it asks for every address.
 *
 * The node agent runs each pod as local processes sharing the machine's network; two pods
 * listening on 0.0.0.0:11211 would collide. Loaded with LD_PRELOAD, this bind() rewrites
 * INADDR_ANY to the IPv4 address in NODE_AGENT_POD_IP, and in6addr_any to the same address
 * IPv4-mapped (clearing IPV6_V6ONLY so that the mapped address is allowed). Every other
 * bind() is passed through unchanged. Statically linked programs do not go through it.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

typedef int (*bind_fn)(int, const struct sockaddr *, socklen_t);

int bind(int fd, const struct sockaddr *addr, socklen_t len) {
    bind_fn real = (bind_fn)dlsym(RTLD_NEXT, "bind");
    const char *pod_ip = getenv("NODE_AGENT_POD_IP");
    struct in_addr ip;
    if (real == NULL) {
        return -1;
    }
    if (pod_ip == NULL || addr == NULL || inet_pton(AF_INET, pod_ip, &ip) != 1) {
        return real(fd, addr, len);
    }
    if (addr->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
        struct sockaddr_in in4;
        memcpy(&in4, addr, sizeof in4);
        if (in4.sin_addr.s_addr == htonl(INADDR_ANY)) {
            in4.sin_addr = ip;
            return real(fd, (const struct sockaddr *)&in4, sizeof in4);
        }
    } else if (addr->sa_family == AF_INET6 && len >= (socklen_t)sizeof(struct sockaddr_in6)) {
        struct sockaddr_in6 in6;
        memcpy(&in6, addr, sizeof in6);
        if (memcmp(&in6.sin6_addr, &in6addr_any, sizeof in6.sin6_addr) == 0) {
            int off = 0;
            setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);
            memset(&in6.sin6_addr, 0, sizeof in6.sin6_addr);
            in6.sin6_addr.s6_addr[10] = 0xff;
            in6.sin6_addr.s6_addr[11] = 0xff;
            memcpy(&in6.sin6_addr.s6_addr[12], &ip, 4);
            return real(fd, (const struct sockaddr *)&in6, sizeof in6);
        }
    }
    return real(fd, addr, len);
}
