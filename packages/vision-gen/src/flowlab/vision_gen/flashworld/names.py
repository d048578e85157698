"""The names the `flowlab vision scene3d` options list (light: imported by the CLI before torch)."""

#: the dual-mode model's two ways of sampling: multi-view denoising (mv) or 3D Gaussians re-rendered each step (3d)
MODES = ("mv", "3d")
#: what cross-mode distillation trains: the 3D mode towards the MV mode (FlashWorld) or the MV mode alone (MV-Dist)
DISTILL_MODES = ("3d", "mv")
