"""An offer's flags by their codes: what the catalog table and pane show in their narrow column."""

from __future__ import annotations

from fleet_tui.core.catalog.models import Instance


def test_flag_codes_drop_each_flags_detail_and_keep_their_order():
    inst = Instance(cloud="aws", instance_type="p5.48xlarge", region="us-east-1", accelerator="h100",
                    accelerator_count=8, accelerator_memory_gib=80,
                    flags=("count-fix: p5.48xlarge gets 8 of one GPU (source says 1)",
                           "spot>=on-demand: spot 99 >= on-demand 98 (placeholder or stale)",
                           "unresolved-accelerator: 'X: Y' is not in accelerators.toml"))
    assert inst.flag_codes == ("count-fix", "spot>=on-demand", "unresolved-accelerator")
    assert Instance(cloud="aws", instance_type="t", region="r", accelerator="h100",
                    accelerator_count=1, accelerator_memory_gib=80).flag_codes == ()
