"""Makes aiortc usable inside a network namespace where only `lo` exists.

aioice skips 127.0.0.1 when it gathers host candidates, so inside the test
namespace it would offer no candidate at all. Tests call `use_loopback_only()`
before creating any RTCPeerConnection (and always pass
`RTCConfiguration(iceServers=[])` so that no public STUN server is added).
"""

import aioice.ice


def _loopback_addresses(use_ipv4: bool = True, use_ipv6: bool = False) -> list[str]:
    return ["127.0.0.1"] if use_ipv4 else []


def use_loopback_only() -> None:
    aioice.ice.get_host_addresses = _loopback_addresses
