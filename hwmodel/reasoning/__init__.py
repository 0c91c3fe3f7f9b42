"""System A: step-wise speculative reasoning (MISSION.md section A): SimPy replays of traces under policies."""
