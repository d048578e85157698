"""FlashWorld (Li et al., ICLR 2026) at toy scale: a dual-mode multi-view transformer (MV mode denoises the views,
3D mode predicts pixel-aligned 3D Gaussians rendered to them) on scenes of a few coloured 3D Gaussians, and
cross-mode distillation of the sharp MV mode into a few-step, 3D-consistent 3D mode (DMD with a fake score plus the
cross-mode consistency loss), with MV-Dist, -CMC and generate-then-reconstruct baselines. See README.md."""

from flowlab.core.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "flowlab.vision_gen.flashworld.distill": ["DistillConfig", "distill_cross_mode", "distill_loss"],
        "flowlab.vision_gen.flashworld.evaluate": ["EvalSettings", "scene_metrics"],
        "flowlab.vision_gen.flashworld.head": ["PixelAlignedGaussianHead"],
        "flowlab.vision_gen.flashworld.model": ["DualModeConfig", "DualModeModel", "MVField", "MVOutput",
                                                "ThreeDOutput"],
        "flowlab.vision_gen.flashworld.objective": ["dual_mode_loss"],
        "flowlab.vision_gen.flashworld.sample": ["Sample", "sample_3d", "sample_mv"],
        "flowlab.vision_gen.flashworld.scenes": ["RigConfig", "SceneConfig", "random_scenes", "scene_data"],
        "flowlab.vision_gen.flashworld.store": ["load_model", "save_model"],
        "flowlab.vision_gen.flashworld.train": ["PretrainConfig", "pretrain_dual_mode", "pretrained_model"],
    },
)  # fmt: skip
