"""Cluster head-node views: whose job holds which devices (``jobs``), what a different scheduling
policy or more nodes would do (``queue``, ``workload``), the Slurm reader (``slurm``) and the
cheapest reserved/on-demand/spot mix for a demand profile (``portfolio``). Pure Python, no UI."""
