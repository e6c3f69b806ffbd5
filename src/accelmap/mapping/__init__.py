"""How the work is split and where it lands: mesh axes on network tiers (``placement``)."""
