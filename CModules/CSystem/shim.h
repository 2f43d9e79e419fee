#pragma once
// Linux system calls that Swift's Glibc module does not export, shared by RTC and Signaling.
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>

// `struct mmsghdr`, `recvmmsg` and `sendmmsg` are declared only under _GNU_SOURCE, which the Glibc
// module is built without. This struct has the same layout, and the asm labels bind the libc symbols.
struct csystem_mmsghdr {
    struct msghdr msg_hdr;
    unsigned int msg_len;
};

extern int csystem_recvmmsg(int fd, struct csystem_mmsghdr *vector, unsigned int count, int flags,
                            struct timespec *timeout) __asm__("recvmmsg");
extern int csystem_sendmmsg(int fd, struct csystem_mmsghdr *vector, unsigned int count, int flags)
    __asm__("sendmmsg");
