"""GPU side: device specs, per-phase latency and power models per serving framework."""
