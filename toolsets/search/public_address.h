// Which IP addresses a fetch on an agent's behalf may reach. An agent chooses the URLs that a
// search environment's `open` fetches, so without a guard it could make the serving host request
// its own loopback services, the cloud metadata endpoint (169.254.169.254) or the lab's intranet.
// The check runs on the address a connection is actually made to (after DNS, on every redirect
// hop), so a public name that resolves to a private address is refused too.
//
// Not public: IPv4 0/8, 10/8, 100.64/10 (carrier-grade NAT), 127/8, 169.254/16, 172.16/12,
// 192.0.0/24, 192.0.2/24, 192.88.99/24, 192.168/16, 198.18/15, 198.51.100/24, 203.0.113/24,
// 224/4 and 240/4 (multicast, reserved, broadcast); IPv6 ::, ::1, 64:ff9b:1::/48, 100::/64,
// 2001:db8::/32, fc00::/7, fe80::/10, fec0::/10, ff00::/8, and an IPv4-mapped (::ffff:a.b.c.d),
// IPv4-compatible (::a.b.c.d) or NAT64 (64:ff9b::a.b.c.d) address whose IPv4 part is not public.
#pragma once

#include <string>
#include <string_view>

struct sockaddr;

namespace envforge::search {

// False for the ranges above and for anything that is not AF_INET or AF_INET6.
bool IsPublicAddress(const sockaddr* address);

// The same for an address in text ("93.184.216.34", "2606:2800::1"); false when it does not parse.
bool IsPublicAddressText(std::string_view address);

// "a.b.c.d" or the IPv6 text of the address; "(unknown address family N)" otherwise.
std::string AddressText(const sockaddr* address);

}  // namespace envforge::search
