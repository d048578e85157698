"""Every `flowlab watermark` and `flowlab vision` command meets the bad-input kit (`flowlab.core.testing`): missing,
empty, corrupt and pickled files and folders, wrong contents, NaN, wrong shapes, wrong types, out-of-range numbers,
bad choices and output folders of another run each end in one error naming the argument or file (exit 2), before
any work. The trained folders the later checks need are made once per module at toy size."""

from __future__ import annotations

import itertools
import json
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from safetensors.torch import save_file
from typer.testing import CliRunner

from flowlab.core.testing import BadInput, bad_files, check_bad_inputs, uncovered_commands
from flowlab.vision_gen.cli import app, vision
from flowlab.vision_gen.kit.autoencoder import AutoencoderConfig, TinyAutoencoder

TEACHER = ["--teacher-dim", "16", "--teacher-depth", "1", "--teacher-steps", "4"]
SFBD = ["--rounds", "1", "--pretrain-steps", "2", "--steps", "2", "--clean", "20"]
TINY_AE = AutoencoderConfig(size=32, in_channels=3, latent_channels=8, channels=(4, 8, 8), dataset="photos")
FILE_KINDS = {"missing": "missing_file", "empty": "empty_file", "hollow": "empty_file", "garbage": "corrupt_file",
              "truncated": "corrupt_file", "broken": "corrupt_file", "pickle": "pickle",
              "wrong_content": "wrong_content", "shape": "shape"}  # fmt: skip
INPUT = ["missing_file", "empty_file", "corrupt_file", "pickle", "wrong_content", "shape"]  # of a file or folder
NUMBERS = ["range", "type"]
#: the kinds each command must meet, beyond being covered at all
KINDS = {
    "keygen": [*NUMBERS, "choice", "shape", "mixing"],
    "embed": [*INPUT, *NUMBERS, "nan", "choice"],
    "extract": [*INPUT, *NUMBERS, "nan"],
    "evaluate": [*INPUT, *NUMBERS, "nan", "choice"],
    "generate": [*INPUT, *NUMBERS, "nan", "choice", "mixing"],
    "invert": [*INPUT, *NUMBERS, "choice"],
    "attack": [*(kind for kind in INPUT if kind != "shape"), *NUMBERS, "nan", "choice", "mixing"],  # any size
    "detect": [*INPUT, *NUMBERS, "nan", "choice"],
}
VISION_KINDS = {
    "piflow distill": [*NUMBERS, "nan", "choice", "mixing"],
    "piflow sample": [*INPUT, *NUMBERS, "nan", "choice"],
    "piflow evaluate": [*INPUT, *NUMBERS, "choice"],
    "sfbd run": [*NUMBERS, "nan", "choice", "mixing"],
    "sfbd restore": [*INPUT, "nan", "type", "choice"],
    "cmt mid-train": [*NUMBERS, "nan", "choice", "mixing"],
    "cmt post-train": [*INPUT, *NUMBERS, "nan", "choice", "mixing"],
    "cmt evaluate": [*INPUT, *NUMBERS, "choice"],
    "sr train-teacher": [*NUMBERS, "nan", "choice", "mixing"],
    "sr distill": [*INPUT, *NUMBERS, "choice", "mixing"],
    "sr evaluate": [*INPUT, *NUMBERS, "nan", "choice"],
    "upscale": [*INPUT, *NUMBERS, "nan", "choice"],
}


def _invoke(cli, args: list[str]) -> None:
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output


def _path_cases(invocation: Callable[[str], list[str]], option: str, paths: Mapping[str, Path]) -> list[BadInput]:
    """One case per bad path (its kind from its name), the error naming `option` and the path."""
    return [BadInput(FILE_KINDS[name], invocation(str(path)), [option, str(path)]) for name, path in paths.items()]


def _option_cases(base: Callable[[], list[str]], kind: str, *bad: tuple[str, ...]) -> list[BadInput]:
    """One case of `kind` per option and bad value(s) (`("--steps", "0")`), after a fresh `base()`; the error naming
    the option."""
    return [BadInput(kind, [*base(), *args], [args[0]]) for args in bad]


def _seed_cases(*bases: Callable[[], list[str]]) -> list[BadInput]:
    """A seed beyond torch's generators (2**64) and one that is no number, for each command."""
    return [BadInput(kind, [*base(), "--seed", seed], ["--seed"]) for base in bases
            for kind, seed in (("range", str(2**64)), ("type", "x"))]  # fmt: skip


def _check(cli, cases: list[BadInput], tmp: Path, marker: Path) -> None:
    """`check_bad_inputs`, and no case wrote anything (each wrote, if at all, under `tmp/out`)."""
    check_bad_inputs(cli, cases, pickle_marker=marker)
    written = sorted(str(p) for p in (tmp / "out").rglob("*"))
    assert not (tmp / "out").exists(), f"bad inputs wrote {written}"


@pytest.fixture(scope="module")
def bad(tmp_path_factory) -> dict[str, dict[str, Path]]:
    """`bad_files` of each input format (one folder: one PICKLE_RAN marker), truncated from a good file."""
    folder = tmp_path_factory.mktemp("bad")
    good = {suffix: folder / f"good{suffix}" for suffix in (".pt", ".npy", ".safetensors", ".png")}
    torch.save(torch.zeros(4, 2, 8, 8), good[".pt"])
    np.save(good[".npy"], np.zeros((4, 2, 8, 8), np.float32))
    save_file({"y": torch.zeros(4, 2, 8, 8)}, good[".safetensors"])
    Image.fromarray(np.full((9, 13, 3), 128, np.uint8)).save(good[".png"])
    return {suffix: bad_files(folder, suffix, like=path) for suffix, path in good.items()}


@pytest.fixture(scope="module")
def marker(bad) -> Path:
    return bad[".pt"]["missing"].parent / "PICKLE_RAN"


def _bad_folders(root: Path, good: Path, weights: str, config: str, edit: Callable[[dict], None],
                 bad: Mapping[str, Path]) -> dict[str, Path]:  # fmt: skip
    """Copies of the saved folder `good` whose `weights` file is one of the `bad` ones, whose `config` is not JSON
    (`broken`) or another format's (`wrong_content`) or edited by `edit` to describe other shapes than the weights
    hold (`shape`); no folder (`missing`) and an empty one (`hollow`)."""
    root.mkdir(exist_ok=True)
    folders = {"missing": root / "missing", "hollow": root / "hollow"}
    folders["hollow"].mkdir(exist_ok=True)
    for name in ("empty", "garbage", "truncated", "pickle", "broken", "wrong_content", "shape"):
        folders[name] = Path(shutil.copytree(good, root / name, dirs_exist_ok=True))
    for name in ("empty", "garbage", "truncated", "pickle"):
        shutil.copy(bad[name], folders[name] / weights)
    (folders["broken"] / config).write_text("{not json")
    (folders["wrong_content"] / config).write_text(json.dumps({"format": "something else", "version": 7}))
    meta = json.loads((good / config).read_text())
    edit(meta)
    (folders["shape"] / config).write_text(json.dumps(meta))
    return folders


# ---------------------------------------------------------------------------------------------------- watermark


@pytest.fixture(scope="module")
def keys(tmp_path_factory) -> dict[str, Path]:
    """1x16x16 keys of the three methods, and latents / messages / nonces embedded with them."""
    tmp = tmp_path_factory.mktemp("watermark")
    extra = {"spherical": [], "gaussian_shading": ["--message-shape", "1x4x8"], "tree_ring": ["--radius", "4"]}
    files = {}
    for method, args in extra.items():
        files[method] = tmp / method
        _invoke(app, ["keygen", "--out", str(files[method]), "--method", method, "--latent", "1x16x16", *args])
    for method in ("spherical", "gaussian_shading"):
        _invoke(app, ["embed", "--key", str(files[method]), "--out", str(tmp / f"{method}.pt"), "--n", "2"])
    z = torch.load(tmp / "spherical.pt", weights_only=True)
    made = {"dict": {"z": z}, "nan": z * float("nan"), "small": z[:, :, :8, :8], "bits7": torch.ones(2, 7),
            "twos": torch.full((2, 32), 2), "nan_bits": torch.full((2, 32), float("nan")),
            "nonces5": torch.zeros(2, 5, dtype=torch.uint8)}  # fmt: skip
    for name, value in made.items():
        torch.save(value, tmp / f"{name}.pt")
        files[name] = tmp / f"{name}.pt"
    for name in ("spherical.pt", "spherical.messages.pt", "gaussian_shading.pt", "gaussian_shading.nonces.pt",
                 "gaussian_shading.messages.pt"):  # fmt: skip
        files[name] = tmp / name
    files["tmp"] = tmp
    return files | _image_files(tmp)


def _image_files(tmp: Path) -> dict[str, Path]:
    """PNGs the digits model reads (16x16 greyscale), one of another size, files that only look like PNGs, a 1x8x8
    key (not the model's latents), a folder that is not empty and a saved diffusers pipeline (a random 16x16 UNet)."""
    from diffusers import DDIMScheduler, DDPMPipeline

    from flowlab.vision_gen.kit.nets import tiny_unet

    files = {f"img{i}.png": tmp / f"img{i}.png" for i in range(2)}
    for i, path in enumerate(files.values()):
        Image.fromarray(np.full((16, 16), 60 * i, np.uint8)).save(path)
    files |= {name: tmp / name for name in ("small.png", "text.png", "jpeg.png", "pic.jpg", "full", "spherical8")}
    Image.fromarray(np.zeros((12, 12), np.uint8)).save(files["small.png"])
    files["text.png"].write_text("this is not a png")
    Image.fromarray(np.zeros((16, 16), np.uint8)).save(files["jpeg.png"], format="JPEG")
    Image.fromarray(np.zeros((16, 16), np.uint8)).save(files["pic.jpg"])
    files["full"].mkdir()
    (files["full"] / "notes.txt").write_text("not generated here")
    _invoke(app, ["keygen", "--out", str(files["spherical8"]), "--latent", "1x8x8", "--message-bits", "8"])
    torch.manual_seed(0)
    files["pipeline"] = tmp / "pipeline"
    DDPMPipeline(unet=tiny_unet(16, 1, base_channels=8), scheduler=DDIMScheduler()).save_pretrained(files["pipeline"])
    torch.save(torch.ones(3, 32), tmp / "bits3.pt")
    return files | {"bits3.pt": tmp / "bits3.pt"}


def _key_folders(keys, bad) -> dict[str, Path]:
    def other_bits(meta: dict) -> None:
        meta["config"]["message_bits"] = 16

    return _bad_folders(keys["tmp"] / "bad_keys", keys["spherical"], "tensors.safetensors", "key.json", other_bits,
                        bad[".safetensors"])  # fmt: skip


def _watermark_cases(keys, bad) -> list[BadInput]:
    tmp, counter = keys["tmp"], itertools.count()
    out = tmp / "out"  # where the bad cases would write: never made
    pt = {name: bad[".pt"][name] for name in ("missing", "empty", "garbage", "truncated", "pickle")}
    folders = _key_folders(keys, bad)

    def keygen() -> list[str]:
        return ["keygen", "--out", str(out / f"key{next(counter)}"), "--method", "spherical", "--latent", "1x16x16"]

    def embed() -> list[str]:
        return ["embed", "--key", str(keys["spherical"]), "--out", str(out / f"z{next(counter)}.pt")]

    def extract(key: str = "spherical") -> list[str]:
        return ["extract", "--key", str(keys[key]), "--latents", str(keys[f"{key}.pt"]), "--message",
                str(keys[f"{key}.messages.pt"])]  # fmt: skip

    def evaluate() -> list[str]:
        return ["evaluate", "--n", "4", "--latent", "1x16x16", "--scheme", "gaussian"]

    cases = []
    # keygen
    cases += _option_cases(keygen, "range", ("--latent", "0x16x16"), ("--message-bits", "-1"), ("--repetitions", "4"),
                           ("--block-size", "7"), ("--block-size", "-1"))  # fmt: skip
    cases += [BadInput("range", [*keygen(), "--method", "tree_ring", "--radius", "8"], ["--radius"]),
              BadInput("range", [*keygen(), "--method", "tree_ring", "--radius", "0"], ["--radius"])]  # fmt: skip
    cases += _option_cases(keygen, "type", ("--latent", "4xAx8"), ("--message-bits", "1.5"))
    cases += _option_cases(keygen, "choice", ("--method", "stegano"))
    cases += [BadInput("choice", [*keygen(), "--method", "gaussian_shading", "--key-mode", "shared"], ["--key-mode"]),
              BadInput("shape", [*keygen(), "--method", "gaussian_shading", "--message-shape", "1x3x8"],
                       ["--message-shape"]),
              BadInput("shape", [*keygen(), "--method", "tree_ring", "--latent", "16x16", "--radius", "4"],
                       ["--latent"]),
              BadInput("mixing", ["keygen", "--out", str(keys["spherical"]), "--latent", "1x16x16"], ["--out"]),
              BadInput("mixing", ["keygen", "--out", str(keys["spherical.pt"]), "--latent", "1x16x16"],
                       ["--out"])]  # fmt: skip
    # embed
    cases += _path_cases(lambda p: [*embed(), "--messages", p], "--messages", pt)
    cases += _path_cases(lambda p: ["embed", "--key", p, "--out", str(out / f"z{next(counter)}.pt")], "--key", folders)
    cases += [BadInput("wrong_content", [*embed(), "--messages", str(keys["dict"])], ["--messages"]),
              BadInput("nan", [*embed(), "--messages", str(keys["nan_bits"])], ["--messages"]),
              BadInput("shape", [*embed(), "--messages", str(keys["bits7"])], ["--messages"]),
              BadInput("range", [*embed(), "--messages", str(keys["twos"])], ["--messages"]),
              BadInput("choice", [*embed(), "--out", str(out / "z.png")], ["--out"]),
              BadInput("choice", [*embed(), "--out", str(out / "z")], ["--out"])]  # fmt: skip
    cases += _option_cases(embed, "range", ("--n", "0"), ("--n", "-3"))
    cases += _option_cases(embed, "type", ("--n", "two"))
    # extract
    cases += _path_cases(lambda p: [*extract(), "--latents", p], "--latents", pt)
    cases += _path_cases(lambda p: [*extract(), "--message", p], "--message", pt)
    cases += _path_cases(lambda p: [*extract("gaussian_shading"), "--nonces", p], "--nonces", pt)
    cases += _path_cases(lambda p: ["extract", "--key", p, "--latents", str(keys["spherical.pt"])], "--key", folders)
    cases += [BadInput("wrong_content", [*extract(), "--latents", str(keys["dict"])], ["--latents"]),
              BadInput("wrong_content", [*extract(), "--message", str(keys["dict"])], ["--message"]),
              BadInput("nan", [*extract(), "--latents", str(keys["nan"])], ["--latents"]),
              BadInput("nan", ["extract", "--key", str(keys["tree_ring"]), "--latents", str(keys["nan"])],
                       ["--latents"]),
              BadInput("nan", [*extract(), "--message", str(keys["nan_bits"])], ["--message"]),
              BadInput("shape", [*extract(), "--latents", str(keys["small"])], ["--latents"]),
              BadInput("shape", ["extract", "--key", str(keys["tree_ring"]), "--latents", str(keys["small"])],
                       ["--latents"]),
              BadInput("shape", [*extract(), "--message", str(keys["bits7"])], ["--message"]),
              BadInput("shape", [*extract("gaussian_shading"), "--nonces", str(keys["nonces5"])], ["--nonces"]),
              BadInput("range", [*extract(), "--message", str(keys["twos"])], ["--message"])]  # fmt: skip
    cases += _option_cases(extract, "range", ("--fpr", "1.5"), ("--fpr", "0"))
    cases += _option_cases(extract, "nan", ("--fpr", "nan"))
    cases += _option_cases(extract, "type", ("--fpr", "often"))
    # evaluate
    cases += _option_cases(evaluate, "choice", ("--protocol", "quality"), ("--scheme", "stegano"))
    cases += _option_cases(evaluate, "range", ("--n", "1"), ("--latent", "0x16x16"))
    cases += _option_cases(evaluate, "shape", ("--latent", "1x8x8"), ("--latent", "16x16"))
    cases += _option_cases(evaluate, "type", ("--n", "many"))
    return cases + _seed_cases(keygen, embed, evaluate) + _watermark_file_cases(keys, bad, folders)


def _watermark_file_cases(keys, bad, key_folders: dict[str, Path]) -> list[BadInput]:
    """generate, invert, attack, detect and evaluate's detection on PNG files and a --model."""
    tmp, counter = keys["tmp"], itertools.count()
    out = tmp / "out"
    pt = {name: bad[".pt"][name] for name in ("missing", "empty", "garbage", "truncated", "pickle")}
    png = bad[".png"]
    images = [str(keys["img0.png"]), str(keys["img1.png"])]
    sph = ["--key", str(keys["spherical"]), "--message", str(keys["spherical.messages.pt"])]

    def wider(meta: dict) -> None:
        meta["block_out_channels"] = [16, 32]

    models = _bad_folders(tmp / "bad_pipelines", keys["pipeline"], "unet/diffusion_pytorch_model.safetensors",
                          "unet/config.json", wider, bad[".safetensors"])  # fmt: skip

    def generate() -> list[str]:
        return ["generate", "--key", str(keys["spherical"]), "--out", str(out / f"g{next(counter)}"), "--steps", "2"]

    def invert() -> list[str]:
        return ["invert", *images, "--out", str(out / "z.pt"), "--steps", "2"]

    def attack() -> list[str]:
        return ["attack", *images, "--attack", "gaussian_noise", "--out", str(out / f"a{next(counter)}")]

    def detect(key: str = "spherical") -> list[str]:
        return ["detect", *images, "--key", str(keys[key]), "--message", str(keys[f"{key}.messages.pt"]), "--steps",
                "2"]  # fmt: skip

    def evaluate() -> list[str]:
        return ["evaluate", *images, *sph, "--steps", "2"]

    def on_images(base: Callable[[], list[str]], name: str, kind: str) -> BadInput:
        """`base` with the two good PNGs replaced by keys[name]."""
        args = [str(keys[name]) if a == images[0] else a for a in base() if a != images[1]]
        return BadInput(kind, args, ["IMAGES", name])

    cases = []
    for base in (invert, attack, detect, evaluate):
        cases += _path_cases(lambda p, base=base: [base()[0], p, *base()[3:]], "IMAGES", png)
        cases += [on_images(base, "text.png", "wrong_content"), on_images(base, "jpeg.png", "wrong_content"),
                  on_images(base, "pic.jpg", "choice")]  # fmt: skip
    for base in (invert, detect, evaluate):
        cases.append(on_images(base, "small.png", "shape"))
    for base in (generate, invert, detect, evaluate):
        cases += _path_cases(lambda p, base=base: [*base(), "--model", p], "--model", models)
        cases += _option_cases(base, "choice", ("--model", str(tmp / "nowhere")), ("--device", "tpu"))
        cases += _option_cases(base, "range", ("--steps", "0"))
        cases += _option_cases(base, "type", ("--steps", "x"))
    for base in (generate, detect):
        cases += _path_cases(lambda p, base=base: [*base(), "--key", p], "--key", key_folders)
        cases += [BadInput("shape", [*base(), "--key", str(keys["spherical8"])], ["--key"])]
    # generate
    cases += _path_cases(lambda p: [*generate(), "--messages", p], "--messages", pt)
    cases += [BadInput("wrong_content", [*generate(), "--messages", str(keys["dict"])], ["--messages"]),
              BadInput("nan", [*generate(), "--messages", str(keys["nan_bits"])], ["--messages"]),
              BadInput("shape", [*generate(), "--messages", str(keys["bits7"])], ["--messages"]),
              BadInput("range", [*generate(), "--messages", str(keys["twos"])], ["--messages"]),
              BadInput("mixing", [*generate(), "--out", str(keys["full"])], ["--out", "not empty"]),
              BadInput("mixing", [*generate(), "--out", str(keys["spherical.pt"])], ["--out"])]  # fmt: skip
    cases += _option_cases(generate, "range", ("--n", "0"))
    cases += _option_cases(generate, "type", ("--n", "four"))
    # invert
    cases += _option_cases(invert, "choice", ("--out", str(out / "z.npy")))
    # attack
    cases += _option_cases(attack, "choice", ("--attack", "stegano"))
    cases += _option_cases(attack, "range", ("--strength", "-1"))
    cases += [BadInput("range", [*attack(), "--attack", name, "--strength", value], ["--strength", name])
              for name, value in (("jpeg", "0"), ("median_filter", "2"), ("random_crop", "1.5"))]  # fmt: skip
    cases += _option_cases(attack, "nan", ("--strength", "nan"), ("--strength", "inf"))
    cases += _option_cases(attack, "type", ("--strength", "high"))
    cases += [BadInput("mixing", [*attack(), "--out", str(keys["full"])], ["--out", "not empty"])]
    # detect and evaluate's detection: the expected bits and nonces, checked before the inversion
    for base in (detect, evaluate):
        cases += _path_cases(lambda p, base=base: [*base(), "--message", p], "--message", pt)
        cases += [BadInput("wrong_content", [*base(), "--message", str(keys["dict"])], ["--message"]),
                  BadInput("nan", [*base(), "--message", str(keys["nan_bits"])], ["--message"]),
                  BadInput("shape", [*base(), "--message", str(keys["bits7"])], ["--message"]),
                  BadInput("shape", [*base(), "--message", str(keys["bits3.pt"])], ["--message"]),
                  BadInput("range", [*base(), "--message", str(keys["twos"])], ["--message"])]  # fmt: skip
        cases += _option_cases(base, "range", ("--fpr", "1.5"))
        cases += _option_cases(base, "nan", ("--fpr", "nan"))
        cases += _option_cases(base, "type", ("--fpr", "often"))
    cases += _path_cases(lambda p: [*detect("gaussian_shading"), "--nonces", p], "--nonces", pt)
    cases += [BadInput("shape", [*detect("gaussian_shading"), "--nonces", str(keys["nonces5"])], ["--nonces"]),
              BadInput("missing_file", detect("gaussian_shading"), ["--nonces"])]  # fmt: skip
    # evaluate: its latents, and which protocol reads what
    latents = ["evaluate", *sph]
    cases += _path_cases(lambda p: [*latents, "--latents", p], "--latents", pt)
    cases += [BadInput("nan", [*latents, "--latents", str(keys["nan"])], ["--latents"]),
              BadInput("shape", [*latents, "--latents", str(keys["small"])], ["--latents"]),
              BadInput("wrong_content", [*latents, "--latents", str(keys["dict"])], ["--latents"]),
              BadInput("choice", [*evaluate(), "--latents", str(keys["spherical.pt"])], ["--latents"]),
              BadInput("choice", ["evaluate", *images, "--message", str(keys["spherical.messages.pt"])], ["--key"]),
              BadInput("choice", ["evaluate", *images, "--key", str(keys["spherical"])], ["--message"]),
              BadInput("choice", ["evaluate", "--message", str(keys["spherical.messages.pt"])],
                       ["--message", "detection"]),
              BadInput("choice", ["evaluate", "--message", "fixed"], ["--message", "--scheme spherical_fixed"]),
              BadInput("choice", ["evaluate", "--protocol", "speed", "--key", str(keys["spherical"])], ["--key"]),
              BadInput("choice", ["evaluate", "--key", str(keys["spherical"]), "--scheme", "gaussian"],
                       ["--scheme"]),
              BadInput("shape", ["evaluate", "--key", str(keys["spherical"]), "--latent", "1x8x8"],
                       ["--latent"])]  # fmt: skip
    return cases + _seed_cases(generate, attack)


def test_watermark_bad_inputs(keys, bad, marker, monkeypatch):
    def no_work(config, device):
        raise AssertionError("a bad input reached the digits teacher's build")

    monkeypatch.setattr("flowlab.vision_gen.kit.generators.digits_denoiser", no_work)
    _check(app, _watermark_cases(keys, bad), keys["tmp"], marker)
    assert json.loads((keys["spherical"] / "key.json").read_text())["method"] == "spherical"  # never replaced


# ------------------------------------------------------------------------------------------------------- pi-Flow


@pytest.fixture(scope="module")
def student(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("piflow") / "student"
    _invoke(vision, ["piflow", "distill", "--out", str(out), "--steps", "2", "--nfe", "1,2", *TEACHER])
    return out


def _piflow_cases(student: Path, bad) -> list[BadInput]:
    tmp, counter = student.parent, itertools.count()
    out = tmp / "out"

    def wider(meta: dict) -> None:
        meta["teacher"]["dim"] = 32

    folders = _bad_folders(tmp / "bad", student, "student.safetensors", "config.json", wider, bad[".safetensors"])

    def distill() -> list[str]:
        return ["piflow", "distill", "--out", str(out / f"{next(counter)}"), "--steps", "2", "--nfe", "1,2",
                *TEACHER]  # fmt: skip

    def sample() -> list[str]:
        return ["piflow", "sample", "--student", str(student), "--out", str(out / "g.png"), "--n", "10"]

    def evaluate() -> list[str]:
        return ["piflow", "evaluate", "--student", str(student), "--nfe", "1", "--n", "10", "--teacher-steps", "2"]

    foreign = tmp / "foreign"
    foreign.mkdir(exist_ok=True)
    (foreign / "notes.txt").write_text("not a run")
    cases = _option_cases(distill, "range", ("--steps", "0"), ("--nfe", "0"), ("--nfe", "1,-2"),
                          ("--components", "0"), ("--size", "7"), ("--teacher-dim", "0"), ("--teacher-dim", "6"),
                          ("--teacher-depth", "0"), ("--teacher-steps", "-1"))  # fmt: skip
    cases += _option_cases(distill, "nan", ("--guidance", "nan"), ("--guidance", "inf"))
    cases += _option_cases(distill, "type", ("--steps", "two"), ("--nfe", "1,x"), ("--guidance", "high"))
    cases += _option_cases(distill, "choice", ("--method", "shortcut"), ("--device", "tpu"))
    same = ["piflow", "distill", "--out", str(student), "--steps", "2", "--nfe", "1,2", *TEACHER]
    cases += [
        BadInput("mixing", same, ["--out", "holds this run already", "--resume", "--overwrite"]),
        BadInput("mixing", [*same, "--resume", "--overwrite"], ["--out", "not both"]),
    ]
    cases += [BadInput("mixing", ["piflow", "distill", "--out", str(student), "--steps", "3", "--nfe", "1,2",
                                  *TEACHER], ["--out", "another run", "--overwrite"]),
              BadInput("mixing", ["piflow", "distill", "--out", str(foreign), *TEACHER], ["--out"]),
              BadInput("mixing", ["piflow", "distill", "--out", str(foreign / "notes.txt"), *TEACHER],
                       ["--out"])]  # fmt: skip
    for base in (sample, evaluate):
        cases += _path_cases(lambda p, base=base: [*base(), "--student", p], "--student", folders)
        cases += _option_cases(base, "choice", ("--device", "tpu"))
        cases += _option_cases(base, "type", ("--n", "ten"))
        cases += _option_cases(base, "range", ("--n", "0"), ("--nfe", "0"))
    cases += _option_cases(sample, "range", ("--temperature", "0"), ("--temperature", "-1"))
    cases += _option_cases(sample, "nan", ("--temperature", "nan"))
    cases += _option_cases(sample, "choice", ("--out", str(out / "grid.jpg")))
    cases += _option_cases(evaluate, "range", ("--nfe", "2,-1"), ("--teacher-steps", "0"))
    cases += _option_cases(evaluate, "type", ("--nfe", "1,x"))
    return cases + _seed_cases(distill, sample, evaluate)


def test_piflow_bad_inputs(student, bad, marker):
    _check(vision, _piflow_cases(student, bad), student.parent, marker)


# ------------------------------------------------------------------------------------------------------ SFBD-OMNI


@pytest.fixture(scope="module")
def posterior(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("sfbd") / "run"
    _invoke(vision, ["sfbd", "run", "--out", str(out), "--corruption", "mask", *SFBD])
    return out


def _sfbd_cases(posterior: Path, bad) -> list[BadInput]:
    tmp, counter = posterior.parent, itertools.count()
    out = tmp / "out"

    def narrower(meta: dict) -> None:
        meta["sfbd_omni"]["hidden"] = [8]

    folders = _bad_folders(tmp / "bad", posterior, "posterior.safetensors", "config.json", narrower,
                           bad[".safetensors"])  # fmt: skip
    y = torch.cat([torch.zeros(3, 1, 8, 8), torch.ones(3, 1, 8, 8)], 1)
    made = {"good.pt": y, "one_channel.pt": y[:, :1], "three_d.pt": y[:, 0], "nan.pt": y * float("nan"),
            "dict.pt": {"y": y}, "ints.pt": y.long()}  # fmt: skip
    for name, value in made.items():
        torch.save(value, tmp / name)
    save_file({"a": y, "b": y.clone()}, tmp / "two.safetensors")
    (tmp / "y.csv").write_text("0,1\n")

    def run() -> list[str]:
        return ["sfbd", "run", "--out", str(out / f"{next(counter)}"), *SFBD]

    def restore() -> list[str]:
        return ["sfbd", "restore", "--model", str(posterior), "--observations", str(tmp / "good.pt"), "--out",
                str(out / "x.pt")]  # fmt: skip

    cases = _option_cases(run, "range", ("--p", "1.5"), ("--sigma", "-1", "--corruption", "noise"),
                          ("--k", "3", "--corruption", "pool"), ("--k", "0", "--corruption", "pool"),
                          ("--keep", "0", "--corruption", "dct"), ("--keep", "9", "--corruption", "dct"),
                          ("--noise-std", "-1", "--corruption", "pool"), ("--clean", "-1"), ("--clean", "100000"),
                          ("--rounds", "-1"), ("--pretrain-steps", "-1"), ("--steps", "-1"),
                          ("--clean-weight", "1.0"), ("--online-gamma", "0"))  # fmt: skip
    cases += _option_cases(run, "range", ("--clean", "0", "--corruption", "pool"))
    cases += _option_cases(run, "nan", ("--p", "nan"), ("--sigma", "nan", "--corruption", "noise"),
                           ("--noise-std", "nan", "--corruption", "dct"), ("--clean-weight", "nan"),
                           ("--online-gamma", "nan"))  # fmt: skip
    cases += _option_cases(run, "type", ("--k", "two"), ("--p", "half"), ("--rounds", "1.5"))
    cases += _option_cases(run, "choice", ("--corruption", "blur"), ("--device", "tpu"))
    cases += [BadInput("mixing", ["sfbd", "run", "--out", str(posterior), "--corruption", "noise", *SFBD],
                       ["--out", "another run"])]  # fmt: skip
    cases += _path_cases(lambda p: [*restore(), "--model", p], "--model", folders)
    for suffix in (".pt", ".npy", ".safetensors"):
        cases += _path_cases(lambda p: [*restore(), "--observations", p], "--observations", bad[suffix])
    for kind, name in (("wrong_content", "dict.pt"), ("wrong_content", "ints.pt"), ("wrong_content", "two.safetensors"),
                       ("wrong_content", "y.csv"), ("shape", "one_channel.pt"), ("shape", "three_d.pt"),
                       ("nan", "nan.pt")):  # fmt: skip
        cases.append(BadInput(kind, [*restore(), "--observations", str(tmp / name)], ["--observations", name]))
    cases += _option_cases(restore, "choice", ("--out", str(out / "x.png")), ("--device", "gpu0"))
    return cases + _seed_cases(run, restore)


def test_sfbd_bad_inputs(posterior, bad, marker):
    _check(vision, _sfbd_cases(posterior, bad), posterior.parent, marker)


# ------------------------------------------------------------------------------------------------------------ CMT


@pytest.fixture(scope="module")
def mid(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("cmt") / "mid"
    _invoke(vision, ["cmt", "mid-train", "--out", str(out), "--steps", "2", "--batch-size", "16", "--nfe", "4",
                     *TEACHER])  # fmt: skip
    return out


def _cmt_cases(mid: Path, bad) -> list[BadInput]:
    tmp, counter = mid.parent, itertools.count()
    out = tmp / "out"

    def wider(meta: dict) -> None:
        meta["teacher"]["dim"] = 32

    folders = _bad_folders(tmp / "bad", mid, "student.safetensors", "config.json", wider, bad[".safetensors"])

    def mid_train() -> list[str]:
        return ["cmt", "mid-train", "--out", str(out / f"{next(counter)}"), "--steps", "2", "--batch-size", "16",
                "--nfe", "4", *TEACHER]  # fmt: skip

    def post_train() -> list[str]:
        return ["cmt", "post-train", "--out", str(out / f"{next(counter)}"), "--init", "random", "--steps", "1",
                "--batch-size", "8", *TEACHER]  # fmt: skip

    def evaluate() -> list[str]:
        return ["cmt", "evaluate", "--student", str(mid), "--n", "10"]

    cases = []
    for base in (mid_train, post_train):
        cases += _option_cases(base, "range", ("--steps", "0"), ("--batch-size", "0"), ("--lr", "-1"),
                               ("--lr", "0"), ("--teacher-dim", "0"), ("--teacher-dim", "6"),
                               ("--teacher-depth", "0"), ("--teacher-steps", "0"))  # fmt: skip
        cases += _option_cases(base, "nan", ("--lr", "nan"))
        cases += _option_cases(base, "type", ("--steps", "two"), ("--lr", "fast"))
        cases += _option_cases(base, "choice", ("--device", "tpu"))
    cases += _option_cases(mid_train, "range", ("--nfe", "0"), ("--batch-size", "20", "--nfe", "16"))
    cases += _option_cases(mid_train, "choice", ("--solver", "euler"), ("--metric", "lpips"), ("--branch", "flow"))
    cases += _option_cases(post_train, "range", ("--q", "1"), ("--eval-every", "-1"))
    cases += _option_cases(post_train, "nan", ("--q", "nan"))
    cases += _option_cases(post_train, "choice", ("--method", "meanflow_x"),
                           ("--init", str(mid), "--method", "meanflow"))  # fmt: skip
    cases += _path_cases(lambda p: [*post_train(), "--init", p], "--init", folders)
    cases += [BadInput("mixing", ["cmt", "mid-train", "--out", str(mid), "--steps", "3", "--batch-size", "16",
                                  "--nfe", "4", *TEACHER], ["--out", "another run"]),
              BadInput("mixing", ["cmt", "post-train", "--out", str(mid), "--init", "random", *TEACHER],
                       ["--out", "another run"])]  # fmt: skip
    cases += _path_cases(lambda p: [*evaluate(), "--student", p], "--student", folders)
    cases += _option_cases(evaluate, "range", ("--n", "1"))
    cases += _option_cases(evaluate, "type", ("--n", "ten"))
    cases += _option_cases(evaluate, "choice", ("--grid", str(out / "g.jpg")), ("--device", "tpu"))
    return cases + _seed_cases(mid_train, post_train, evaluate)


def test_cmt_bad_inputs(mid, bad, marker):
    _check(vision, _cmt_cases(mid, bad), mid.parent, marker)


# ------------------------------------------------------------------------------------------------------ GenDR-Pix


@pytest.fixture(scope="module")
def sr(tmp_path_factory):
    """(teacher, student) folders, with the kit's autoencoder a tiny untrained one (as long as the module runs)."""
    tmp = tmp_path_factory.mktemp("sr")
    with pytest.MonkeyPatch.context() as patch:
        torch.manual_seed(0)
        ae = TinyAutoencoder(TINY_AE).eval().requires_grad_(False)
        patch.setattr("flowlab.vision_gen.kit.autoencoder.tiny_autoencoder", lambda config, device=None: ae)
        teacher, student = tmp / "teacher", tmp / "student"
        _invoke(vision, ["sr", "train-teacher", "--out", str(teacher), "--steps", "1", "--pairs", "8", "--crop", "16"])
        _invoke(vision, ["sr", "distill", "--teacher", str(teacher), "--out", str(student), "--stage1-steps", "1",
                         "--stage2-steps", "1"])  # fmt: skip
        yield teacher, student


def _sr_cases(sr, bad) -> list[BadInput]:
    teacher, student = sr
    tmp, counter = teacher.parent, itertools.count()
    out = tmp / "out"

    def wider(meta: dict) -> None:
        meta["gendr_pix"]["width"] = 16

    teachers = _bad_folders(tmp / "bad_teachers", teacher, "teacher.safetensors", "config.json", wider,
                            bad[".safetensors"])  # fmt: skip
    students = _bad_folders(tmp / "bad_students", student, "stage2.safetensors", "config.json", wider,
                            bad[".safetensors"])  # fmt: skip
    image = bad[".png"]["truncated"].parent / "good.png"
    (tmp / "pic.gif").write_bytes(b"GIF89a")
    (tmp / "text.png").write_text("this is not a png")

    def train() -> list[str]:
        return ["sr", "train-teacher", "--out", str(out / f"{next(counter)}"), "--steps", "1", "--pairs", "8",
                "--crop", "16"]  # fmt: skip

    def distill() -> list[str]:
        return ["sr", "distill", "--teacher", str(teacher), "--out", str(out / f"{next(counter)}"),
                "--stage1-steps", "1", "--stage2-steps", "1"]  # fmt: skip

    def evaluate() -> list[str]:
        return ["sr", "evaluate", "--model", str(student), "--n", "2", "--size", "16"]

    def upscale(source: Path = image) -> list[str]:
        return ["upscale", str(source), "--model", str(student), "--out", str(out / "up.png")]

    cases = _option_cases(train, "range", ("--steps", "0"), ("--crop", "20"), ("--pairs", "0"), ("--lr", "-1"))
    cases += _option_cases(train, "nan", ("--lr", "nan"))
    cases += _option_cases(train, "type", ("--crop", "wide"))
    cases += _option_cases(train, "choice", ("--device", "tpu"))
    cases += [BadInput("mixing", ["sr", "train-teacher", "--out", str(teacher), "--steps", "2", "--pairs", "8",
                                  "--crop", "16"], ["--out", "another run"]),
              BadInput("mixing", [*distill(), "--out", str(student), "--stage1-steps", "2"],
                       ["--out", "another run"])]  # fmt: skip
    cases += _path_cases(lambda p: [*distill(), "--teacher", p], "--teacher", teachers)
    cases += [BadInput("wrong_content", [*distill(), "--teacher", str(student / "stage2.safetensors")], ["--teacher"])]
    cases += _option_cases(distill, "range", ("--stage1-steps", "0"), ("--stage2-steps", "-1"))
    cases += _option_cases(distill, "type", ("--stage1-steps", "x"))
    cases += _option_cases(distill, "choice", ("--device", "tpu"))
    cases += _path_cases(lambda p: [*evaluate(), "--model", p], "--model", students)
    cases += _option_cases(evaluate, "range", ("--n", "0"), ("--size", "20"), ("--size", "-16"), ("--cfg-weight", "-1"))
    cases += _option_cases(evaluate, "nan", ("--cfg-weight", "nan"))
    cases += _option_cases(evaluate, "type", ("--n", "four"))
    cases += _option_cases(evaluate, "choice", ("--out", str(out / "table.csv")), ("--device", "gpu"))
    png = {name: path for name, path in bad[".png"].items() if name != "pickle"}
    cases += _path_cases(lambda p: ["upscale", p, "--model", str(student)], "IMAGE", png)
    cases += _path_cases(lambda p: [*upscale(), "--model", p], "--model", students)
    cases += [BadInput("pickle", upscale(bad[".png"]["pickle"]), ["IMAGE"]),
              BadInput("wrong_content", upscale(tmp / "text.png"), ["IMAGE"]),
              BadInput("choice", upscale(tmp / "pic.gif"), ["IMAGE"])]  # fmt: skip
    cases += _option_cases(upscale, "range", ("--scale", "2"), ("--scale", "0"), ("--tile", "4"),
                           ("--overlap", "-1"), ("--overlap", "16", "--tile", "32"),
                           ("--cfg-weight", "-1"))  # fmt: skip
    cases += _option_cases(upscale, "nan", ("--cfg-weight", "nan"))
    cases += _option_cases(upscale, "type", ("--scale", "four"), ("--tile", "big"))
    cases += _option_cases(upscale, "choice", ("--mode", "tta"), ("--out", str(out / "up.bmp")), ("--device", "gpu"))
    return cases + _seed_cases(train, evaluate)


def test_sr_bad_inputs(sr, bad, marker):
    _check(vision, _sr_cases(sr, bad), sr[0].parent, marker)


def test_every_command_meets_its_kinds(keys, student, posterior, mid, sr, bad):
    # MOLM's `molm train|evaluate` have their own bad-input test (test_vision_gen_molm_cli.py)
    assert [c for c in uncovered_commands(app, _watermark_cases(keys, bad), KINDS) if not c.startswith("molm ")] == []
    cases = _piflow_cases(student, bad) + _sfbd_cases(posterior, bad) + _cmt_cases(mid, bad) + _sr_cases(sr, bad)
    # commands whose bad inputs have their own test file (test_vision_gen_<x>_cli.py)
    own_file = ("promoe ", "dsa ", "patronus ", "scene3d ")
    assert [c for c in uncovered_commands(vision, cases, VISION_KINDS) if not c.startswith(own_file)] == []
