"""Verification of a user's KVMU RTL against the model (docs/kvmu.md, "Verifying RTL"): the signal contract
(:mod:`.contract`), hypothesis-generated command streams (:mod:`.streams`), the simulator session that drives the
RTL under cocotb (:mod:`.session`, :mod:`.tb`), the scoreboard and shrinker (:mod:`.verify`), the RTL mutants
(:mod:`.mutants`) and the yosys resource counts (:mod:`.synth`)."""
