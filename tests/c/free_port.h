/* A free TCP port on the loopback interface, for a job's rendezvous in the
 * C tests (tests/cpp/free_port.hpp is the C++ tests' one). Fails the
 * running cmocka test when the system gives none. */
#ifndef TPT_TEST_FREE_PORT_H
#define TPT_TEST_FREE_PORT_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static inline int free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || getsockname(fd, (struct sockaddr *)&a, &len) != 0)
    fail_msg("no free port");
  close(fd);
  return ntohs(a.sin_port);
}

#endif
