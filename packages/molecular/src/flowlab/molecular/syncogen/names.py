"""The names the `flowlab molecular syncogen` options list (light: imported by the CLI before torch)."""

#: SynCoGen, its ablations (without self-conditioning, without the distance losses, sampled without the
#: compatibility mask) and the atom-level baseline without the synthesis graph
VARIANTS = ("syncogen", "no_sc", "no_dist", "no_compat", "atoms")
#: the ETKDG baseline re-embeds SynCoGen's graphs; it is an evaluation, not a trained variant
ETKDG = "graph_etkdg"
