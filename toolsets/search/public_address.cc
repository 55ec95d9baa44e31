#include "toolsets/search/public_address.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <array>
#include <cstdint>
#include <cstring>

namespace envforge::search {
namespace {

struct Ipv4Range {
  uint32_t network;
  int prefix;
};

constexpr uint32_t Ipv4(int a, int b, int c, int d) {
  return (static_cast<uint32_t>(a) << 24) | (static_cast<uint32_t>(b) << 16) | (static_cast<uint32_t>(c) << 8) |
         static_cast<uint32_t>(d);
}

constexpr std::array<Ipv4Range, 15> kNonPublicIpv4 = {{
    {Ipv4(0, 0, 0, 0), 8},
    {Ipv4(10, 0, 0, 0), 8},
    {Ipv4(100, 64, 0, 0), 10},
    {Ipv4(127, 0, 0, 0), 8},
    {Ipv4(169, 254, 0, 0), 16},
    {Ipv4(172, 16, 0, 0), 12},
    {Ipv4(192, 0, 0, 0), 24},
    {Ipv4(192, 0, 2, 0), 24},
    {Ipv4(192, 88, 99, 0), 24},
    {Ipv4(192, 168, 0, 0), 16},
    {Ipv4(198, 18, 0, 0), 15},
    {Ipv4(198, 51, 100, 0), 24},
    {Ipv4(203, 0, 113, 0), 24},
    {Ipv4(224, 0, 0, 0), 4},
    {Ipv4(240, 0, 0, 0), 4},
}};

bool IsPublicIpv4(uint32_t address) {  // host byte order
  for (const Ipv4Range& range : kNonPublicIpv4) {
    uint32_t mask = ~uint32_t{0} << (32 - range.prefix);
    if ((address & mask) == range.network) return false;
  }
  return true;
}

uint32_t EmbeddedIpv4(const uint8_t* bytes) {  // the last four bytes of an IPv6 address
  return (static_cast<uint32_t>(bytes[12]) << 24) | (static_cast<uint32_t>(bytes[13]) << 16) |
         (static_cast<uint32_t>(bytes[14]) << 8) | static_cast<uint32_t>(bytes[15]);
}

bool AllZero(const uint8_t* bytes, int count) {
  for (int i = 0; i < count; ++i) {
    if (bytes[i] != 0) return false;
  }
  return true;
}

bool IsPublicIpv6(const in6_addr& address) {
  const uint8_t* b = address.s6_addr;
  if (AllZero(b, 10) && b[10] == 0xff && b[11] == 0xff) return IsPublicIpv4(EmbeddedIpv4(b));  // ::ffff:a.b.c.d
  if (AllZero(b, 12)) return IsPublicIpv4(EmbeddedIpv4(b));  // ::, ::1, ::a.b.c.d (all non-public below 1.0.0.0)
  static constexpr uint8_t kNat64[12] = {0x00, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0};
  if (std::memcmp(b, kNat64, sizeof kNat64) == 0) return IsPublicIpv4(EmbeddedIpv4(b));  // 64:ff9b::/96
  if (b[0] == 0x00 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b && b[4] == 0x00 && b[5] == 0x01) return false;
  if (b[0] == 0x01 && b[1] == 0x00 && AllZero(b + 2, 6)) return false;             // 100::/64 discard
  if (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x0d && b[3] == 0xb8) return false;  // 2001:db8::/32
  if ((b[0] & 0xfe) == 0xfc) return false;                                         // fc00::/7 unique local
  if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80) return false;                         // fe80::/10 link local
  if (b[0] == 0xfe && (b[1] & 0xc0) == 0xc0) return false;                         // fec0::/10 site local
  if (b[0] == 0xff) return false;                                                  // multicast
  return true;
}

}  // namespace

bool IsPublicAddress(const sockaddr* address) {
  if (address == nullptr) return false;
  if (address->sa_family == AF_INET) {
    sockaddr_in v4;
    std::memcpy(&v4, address, sizeof v4);
    return IsPublicIpv4(ntohl(v4.sin_addr.s_addr));
  }
  if (address->sa_family == AF_INET6) {
    sockaddr_in6 v6;
    std::memcpy(&v6, address, sizeof v6);
    return IsPublicIpv6(v6.sin6_addr);
  }
  return false;
}

bool IsPublicAddressText(std::string_view address) {
  std::string text(address);
  in_addr v4;
  if (inet_pton(AF_INET, text.c_str(), &v4) == 1) return IsPublicIpv4(ntohl(v4.s_addr));
  in6_addr v6;
  if (inet_pton(AF_INET6, text.c_str(), &v6) == 1) return IsPublicIpv6(v6);
  return false;
}

std::string AddressText(const sockaddr* address) {
  char text[INET6_ADDRSTRLEN] = {0};
  if (address != nullptr && address->sa_family == AF_INET) {
    sockaddr_in v4;
    std::memcpy(&v4, address, sizeof v4);
    inet_ntop(AF_INET, &v4.sin_addr, text, sizeof text);
    return text;
  }
  if (address != nullptr && address->sa_family == AF_INET6) {
    sockaddr_in6 v6;
    std::memcpy(&v6, address, sizeof v6);
    inet_ntop(AF_INET6, &v6.sin6_addr, text, sizeof text);
    return text;
  }
  return "(unknown address family " + std::to_string(address == nullptr ? -1 : address->sa_family) + ")";
}

}  // namespace envforge::search
