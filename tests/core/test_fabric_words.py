"""How a layout's links are put in words: no network is named for devices that fit in one node."""

from fleet_tui.core.interconnects import Fabric

NVSWITCH = Fabric(intra_link="NVLink", intra_gbs=900.0, inter_link="EFA", inter_gbps=3200.0,
                  node_devices=8)


def test_devices_inside_one_node_cross_no_network():
    assert NVSWITCH.describe(8) == "NVLink 900 GB/s inside one node"
    assert "EFA" not in NVSWITCH.describe(4)


def test_devices_over_several_nodes_name_both_links():
    words = NVSWITCH.describe(16)
    assert words == "NVLink 900 GB/s inside a node (up to 8 devices); EFA 3200 Gbit/s between nodes"
    assert NVSWITCH.describe() == words  # no device count: both links, as before


def test_an_unknown_network_says_what_is_assumed():
    market = Fabric(intra_link="PCIe", intra_gbs=64.0, inter_link="ethernet", inter_gbps=10.0,
                    node_devices=8, inter_known=False)
    assert "unknown network (assumed 10 Gbit/s) between nodes" in market.describe(16)
