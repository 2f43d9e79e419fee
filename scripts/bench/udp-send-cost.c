// Kernel CPU per UDP datagram sent on loopback, on the sending thread, for the syscall patterns an
// SFU could use (issue 15: is 250k forwarded packets/s per core reachable on this kernel?).
//
//   gcc -O2 -o /tmp/udp-send-cost scripts/bench/udp-send-cost.c -lpthread
//   unshare -n sh -c 'ip link set lo up; for m in mmsg conn connmmsg gso; do /tmp/udp-send-cost 100 300 $m 4; done'
//
// Arguments: DESTINATIONS SIZE MODE [RUN]. A second thread drains DESTINATIONS loopback sockets
// (epoll + recvmmsg). Modes: mmsg = one unconnected socket, sendmmsg of 32 round-robin over the
// destinations (what the SFU does); conn = one connected socket per destination, send() per
// datagram; connmmsg = a connected socket per destination, sendmmsg of RUN datagrams to each;
// gso = unconnected, one sendmsg with UDP_SEGMENT carrying RUN datagrams per destination.
// Linux charges the loopback delivery (the receiver's queue and its wake-up) to the sender.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifndef SOL_UDP
#define SOL_UDP 17
#endif
#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif

enum { MAX_DESTINATIONS = 4096, BATCH = 32 };

static int destinationCount, size, run = 4;
static int receivers[MAX_DESTINATIONS];
static struct sockaddr_in destinations[MAX_DESTINATIONS];
static volatile int stop;

static double seconds(clockid_t clock) {
  struct timespec t;
  clock_gettime(clock, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

/// Drains every receiving socket until `stop`.
static void *drain(void *unused) {
  (void)unused;
  int epoll = epoll_create1(0);
  for (int i = 0; i < destinationCount; i++) {
    struct epoll_event event = {.events = EPOLLIN, .data.fd = receivers[i]};
    epoll_ctl(epoll, EPOLL_CTL_ADD, receivers[i], &event);
  }
  static char buffers[BATCH][2048];
  struct mmsghdr headers[BATCH];
  struct iovec vectors[BATCH];
  while (!stop) {
    struct epoll_event events[64];
    int ready = epoll_wait(epoll, events, 64, 100);
    for (int i = 0; i < ready; i++) {
      int received;
      do {
        memset(headers, 0, sizeof headers);
        for (int k = 0; k < BATCH; k++) {
          vectors[k] = (struct iovec){buffers[k], sizeof buffers[k]};
          headers[k].msg_hdr.msg_iov = &vectors[k];
          headers[k].msg_hdr.msg_iovlen = 1;
        }
        received = recvmmsg(events[i].data.fd, headers, BATCH, MSG_DONTWAIT, NULL);
      } while (received == BATCH);
    }
  }
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s DESTINATIONS SIZE mmsg|conn|connmmsg|gso [RUN]\n", argv[0]);
    return 2;
  }
  destinationCount = atoi(argv[1]);
  size = atoi(argv[2]);
  const char *mode = argv[3];
  if (argc > 4) run = atoi(argv[4]);
  if (destinationCount < 1 || destinationCount > MAX_DESTINATIONS || size < 1 || size > 1400 || run < 1 ||
      run > BATCH) {
    fprintf(stderr, "bad arguments\n");
    return 2;
  }
  int buffer = 4 << 20;
  for (int i = 0; i < destinationCount; i++) {
    receivers[i] = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
    setsockopt(receivers[i], SOL_SOCKET, SO_RCVBUF, &buffer, sizeof buffer);
    struct sockaddr_in any = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    bind(receivers[i], (struct sockaddr *)&any, sizeof any);
    socklen_t length = sizeof destinations[i];
    getsockname(receivers[i], (struct sockaddr *)&destinations[i], &length);
  }
  pthread_t drainer;
  pthread_create(&drainer, NULL, drain, NULL);

  int unconnected = socket(AF_INET, SOCK_DGRAM, 0);
  setsockopt(unconnected, SOL_SOCKET, SO_SNDBUF, &buffer, sizeof buffer);
  static int connected[MAX_DESTINATIONS];
  for (int i = 0; i < destinationCount; i++) {
    connected[i] = socket(AF_INET, SOCK_DGRAM, 0);
    setsockopt(connected[i], SOL_SOCKET, SO_SNDBUF, &buffer, sizeof buffer);
    connect(connected[i], (struct sockaddr *)&destinations[i], sizeof destinations[i]);
  }

  static char payload[BATCH * 1400];
  memset(payload, 0xAB, sizeof payload);
  struct mmsghdr headers[BATCH];
  struct iovec vectors[BATCH];
  long sent = 0;
  int next = 0;
  double wallStart = seconds(CLOCK_MONOTONIC), cpuStart = seconds(CLOCK_THREAD_CPUTIME_ID);
  while (seconds(CLOCK_MONOTONIC) < wallStart + 3) {
    if (!strcmp(mode, "mmsg")) {
      memset(headers, 0, sizeof headers);
      for (int k = 0; k < BATCH; k++) {
        vectors[k] = (struct iovec){payload, size};
        headers[k].msg_hdr.msg_name = &destinations[next];
        headers[k].msg_hdr.msg_namelen = sizeof destinations[next];
        headers[k].msg_hdr.msg_iov = &vectors[k];
        headers[k].msg_hdr.msg_iovlen = 1;
        next = (next + 1) % destinationCount;
      }
      int n = sendmmsg(unconnected, headers, BATCH, 0);
      if (n > 0) sent += n;
    } else if (!strcmp(mode, "conn")) {
      if (send(connected[next], payload, size, 0) > 0) sent++;
      next = (next + 1) % destinationCount;
    } else if (!strcmp(mode, "connmmsg")) {
      memset(headers, 0, sizeof headers);
      for (int k = 0; k < run; k++) {
        vectors[k] = (struct iovec){payload, size};
        headers[k].msg_hdr.msg_iov = &vectors[k];
        headers[k].msg_hdr.msg_iovlen = 1;
      }
      int n = sendmmsg(connected[next], headers, run, 0);
      if (n > 0) sent += n;
      next = (next + 1) % destinationCount;
    } else if (!strcmp(mode, "gso")) {
      char control[CMSG_SPACE(sizeof(uint16_t))];
      struct iovec one = {payload, (size_t)size * run};
      struct msghdr message = {.msg_name = &destinations[next],
                               .msg_namelen = sizeof destinations[next],
                               .msg_iov = &one,
                               .msg_iovlen = 1,
                               .msg_control = control,
                               .msg_controllen = sizeof control};
      struct cmsghdr *segment = CMSG_FIRSTHDR(&message);
      segment->cmsg_level = SOL_UDP;
      segment->cmsg_type = UDP_SEGMENT;
      segment->cmsg_len = CMSG_LEN(sizeof(uint16_t));
      *(uint16_t *)CMSG_DATA(segment) = (uint16_t)size;
      if (sendmsg(unconnected, &message, 0) > 0) sent += run;
      next = (next + 1) % destinationCount;
    } else {
      fprintf(stderr, "unknown mode %s\n", mode);
      return 2;
    }
  }
  double cpu = seconds(CLOCK_THREAD_CPUTIME_ID) - cpuStart;
  double wall = seconds(CLOCK_MONOTONIC) - wallStart;
  stop = 1;
  pthread_join(drainer, NULL);
  printf("%-8s destinations %d size %d run %d: %ld datagrams in %.2f s, sending thread %.0f ns CPU each "
         "(%.0fk per core)\n",
         mode, destinationCount, size, run, sent, wall, cpu / sent * 1e9, sent / cpu / 1e3);
  return 0;
}
