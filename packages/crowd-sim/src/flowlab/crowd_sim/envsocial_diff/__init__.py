"""EnvSocial-Diff (Zhao, Zhang & Huang, ICLR 2026): crowd simulation by a conditional DDPM over each pedestrian's
residual acceleration given its history, its visible neighbours and the environment, on the package's shared data,
physics, simulation engine, metrics and renderer.

Modules: `model` (denoiser, config, sizes, ablations), `features` (ego-frame inputs), `simulator` (`EnvSocialDiff`:
denoiser + schedule + destination force, the `simulate` policy, save/load), `objective` (targets and the epsilon
loss), `train` (teacher forcing, rollout fine-tuning, best of several initialisations), `predict` (prediction
mode), `baselines` (social force and constant-velocity policies), `settings` (the scenarios' typed variants),
`names` (the ablations' names, light for the CLI), `benchmarks`, `cli`.
"""
