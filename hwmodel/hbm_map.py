"""HBM address maps: the HBM IP's ``ADDR_BIT`` list (AMD PG276), parsed into the positions of row, bank,
bank-group and column bits of a granule address.

A map is written most significant bit first, as the IP's ``CONFIG.USER_MCn_ADDR_BIT`` property is, e.g. Shuhai's
BRGCG map ``BA1,BA0,RA13,...,RA0,BG1,CA5,CA4,CA3,CA2,CA1,BG0`` (RC4ML/Shuhai hw/scripts/create_hbm_BRGCG.tcl).
``RA`` alone stands for all row bits (contiguous in every PG276 map); the number of row bits then follows from the
capacity. Bit 0 of the list's last entry is bit 0 of the *granule* address (byte address / granule bytes).
"""

from __future__ import annotations

import dataclasses
import re

#: The address maps of Shuhai's create_hbm_*.tcl scripts (primary: the scripts' ADDR_BIT strings), and the IP
#: default as Shuhai's paper names it (RGBCG).
NAMED_MAPS = {
    "RBC": "RA,BG1,BG0,BA1,BA0,CA5,CA4,CA3,CA2,CA1",
    "RCB": "RA,CA5,CA4,CA3,CA2,CA1,BG1,BG0,BA1,BA0",
    "BRC": "BG1,BG0,BA1,BA0,RA,CA5,CA4,CA3,CA2,CA1",
    "BRGCG": "BA1,BA0,RA,BG1,CA5,CA4,CA3,CA2,CA1,BG0",
    "RGBCG": "RA,BG1,BA1,BA0,CA5,CA4,CA3,CA2,CA1,BG0",
}

_TOKEN = re.compile(r"^(RA|BG|BA|CA)(\d*)$")


@dataclasses.dataclass(frozen=True)
class AddressMap:
    """Bits below and above the contiguous row field, LSB first: each ('BG' | 'BA' | 'CA', index)."""

    low: tuple[tuple[str, int], ...]  # bits 0 .. len(low) - 1 of the granule address
    high: tuple[tuple[str, int], ...]  # bits right above the row bits, LSB first

    @property
    def bank_bits(self) -> int:
        return sum(1 for f, _ in self.low + self.high if f == "BA")

    @property
    def bg_bits(self) -> int:
        return sum(1 for f, _ in self.low + self.high if f == "BG")

    @property
    def col_bits(self) -> int:
        return sum(1 for f, _ in self.low + self.high if f == "CA")

    def bank_of(self, bits: tuple[tuple[str, int], ...], value: int) -> int:
        """Bank index (bank group in the high bits: bank = BG * 2^BA + BA) contributed by ``value``'s bits."""
        bank = 0
        for i, (f, k) in enumerate(bits):
            if value >> i & 1:
                if f == "BA":
                    bank |= 1 << k
                elif f == "BG":
                    bank |= 1 << (k + self.bank_bits)
        return bank


def parse_address_map(text: str) -> AddressMap:
    """Parse a named map (``NAMED_MAPS``) or an ADDR_BIT list; ValueError with the reason if it is not one."""
    text = NAMED_MAPS.get(text.strip().upper(), text)
    toks = [t.strip().upper() for t in text.split(",") if t.strip()]
    seen: set[tuple[str, int]] = set()
    row_at = -1
    parsed: list[tuple[str, int]] = []
    for t in toks:
        m = _TOKEN.match(t)
        if not m:
            raise ValueError(f"a comma list of RA, BGi, BAi, CAi (MSB first), not {t!r}")
        f, k = m.group(1), m.group(2)
        if f == "RA":
            if k:  # explicit row bits must form one contiguous field
                if row_at >= 0 and parsed[-1][0] != "RA":
                    raise ValueError("row bits (RA) must be contiguous")
                if row_at < 0:
                    row_at = len(parsed)
                parsed.append(("RA", int(k)))
                continue
            if row_at >= 0:
                raise ValueError("one row field (RA) only")
            row_at = len(parsed)
            parsed.append(("RA", -1))
            continue
        key = (f, int(k or 0))
        if key in seen:
            raise ValueError(f"bit {t} appears twice")
        seen.add(key)
        parsed.append(key)
    if row_at < 0:
        raise ValueError("no row bits (RA)")
    rows = [i for i, (f, _) in enumerate(parsed) if f == "RA"]
    if rows != list(range(rows[0], rows[-1] + 1)):
        raise ValueError("row bits (RA) must be contiguous")
    high = tuple(reversed(parsed[: rows[0]]))
    low = tuple(reversed(parsed[rows[-1] + 1 :]))
    for f in ("BA", "BG", "CA"):
        idx = sorted(k for g, k in low + high if g == f)
        first = 1 if f == "CA" else 0  # CA0 is the burst's own bit (BL4 in pseudo-channel mode)
        if idx != list(range(first, first + len(idx))):
            raise ValueError(f"{f} bits must be {f}{first}..{f}{first + len(idx) - 1} without gaps, got {idx}")
    if sum(1 for f, _ in low + high if f in ("BA", "BG")) > 4 or sum(1 for f, _ in low + high if f == "BG") > 2:
        raise ValueError("at most 16 banks in at most 4 bank groups (JEDEC HBM2 / HBM2E)")
    return AddressMap(low=low, high=high)
