"""A really shaped path inside a test's network namespace (issue 33): some of the UDP packets on `lo`
go through an `htb` class at a fixed rate with a short tail-drop queue (a `bfifo` of 100 ms at that
rate, as a real bottleneck's), and a share of them is dropped at random by an nftables `numgen
random` rule (netem does not exist in this kernel). Every other packet passes unshaped.

Which packets: those from or to given UDP ports (`sports`/`dports`), e.g. the SFU's port of one
viewer's subscribe connection (its downlink), or a publisher's own ports (its uplink).
"""

from __future__ import annotations

import json
import subprocess

NFT_TABLE = "understudy_shaped"


def _run(*args: str) -> str:
    return subprocess.run(list(args), check=True, timeout=10, capture_output=True, text=True).stdout


class ShapedPath:
    """`kbit` kbit/s plus `loss_percent` % random loss for the packets matched; ``lift`` ends it."""

    def __init__(self, kbit: int, loss_percent: int = 0):
        self.kbit = kbit
        self.loss_percent = loss_percent
        self.active = False

    def start(self, sports: list[int] = (), dports: list[int] = ()) -> "ShapedPath":
        assert sports or dports, "nothing to shape"
        _run("tc", "qdisc", "add", "dev", "lo", "root", "handle", "1:", "htb", "default", "10")
        self.active = True
        _run("tc", "class", "add", "dev", "lo", "parent", "1:", "classid", "1:10", "htb", "rate", "10gbit")
        _run("tc", "class", "add", "dev", "lo", "parent", "1:", "classid", "1:20", "htb", "rate", f"{self.kbit}kbit",
             "ceil", f"{self.kbit}kbit", "burst", "6k")
        # A short queue, as a real bottleneck's: 100 ms at the rate, then drops.
        _run("tc", "qdisc", "add", "dev", "lo", "parent", "1:20", "handle", "20:", "bfifo", "limit",
             str(self.kbit * 1000 // 8 // 10))
        for field, ports in (("sport", sports), ("dport", dports)):
            for port in ports:
                _run("tc", "filter", "add", "dev", "lo", "protocol", "ip", "parent", "1:", "prio", "1", "u32",
                     "match", "ip", "protocol", "17", "0xff", "match", "ip", field, str(port), "0xffff",
                     "flowid", "1:20")
        if self.loss_percent:
            _run("nft", "add", "table", "inet", NFT_TABLE)
            _run("nft", "add", "chain", "inet", NFT_TABLE, "out", "{ type filter hook output priority 0 ; }")
            for field, ports in (("sport", sports), ("dport", dports)):
                for port in ports:
                    _run("nft", "add", "rule", "inet", NFT_TABLE, "out", "udp", field, str(port),
                         "numgen", "random", "mod", "100", "lt", str(self.loss_percent), "drop")
        return self

    def queue(self) -> dict:
        """The shaped queue's counters: `bytes` and `packets` sent through it, `drops` (tail drops of
        a full queue; the random drops happen before it)."""
        for qdisc in json.loads(_run("tc", "-s", "-j", "qdisc", "show", "dev", "lo")):
            if qdisc.get("handle") == "20:":
                return {"bytes": qdisc["bytes"], "packets": qdisc["packets"], "drops": qdisc["drops"]}
        return {"bytes": 0, "packets": 0, "drops": 0}

    def lift(self) -> None:
        subprocess.run(["tc", "qdisc", "del", "dev", "lo", "root"], timeout=10, capture_output=True)
        subprocess.run(["nft", "delete", "table", "inet", NFT_TABLE], timeout=10, capture_output=True)
        self.active = False


def udp_ports_of(pid: int) -> list[int]:
    """The local UDP ports process `pid` has open (its ICE sockets), by `ss`."""
    out = _run("ss", "-uanpH")
    ports = set()
    for line in out.splitlines():
        if f"pid={pid}," in line:
            local = line.split()[3]
            ports.add(int(local.rsplit(":", 1)[1]))
    return sorted(ports)
