"""Links between devices: PCIe generations, host-staged and peer-to-peer paths, network links."""
