"""Writes to_dict.json: json.dump(spec.to_dict()) as the Python runtime does.

The seed, worldfoundry.core, is not installed on wfgen's machines (only its
reference pages are at hand), so its spec dataclasses are restated below
from those pages: frozen dataclasses with the documented fields, defaults
and order; to_dict is dataclasses.asdict, and a variant's dict also carries
the derived model_ref (primary_checkpoint_uri: role primary, base or
checkpoint, else the first checkpoint) and checkpoint_map (role -> uri), as
docs/differences.md records. gen/convert's TestPythonDictIsCurrent runs this
script with python3 and compares its output with the committed file.

    python3 to_dict.py > to_dict.json
"""

import json
import sys
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping


@dataclass(frozen=True)
class InferenceCheckpointRef:
    role: str
    uri: str
    required: bool = True
    status: str = "unknown"

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class InferenceVariantSpec:
    variant_id: str
    label: str
    checkpoints: tuple = ()
    status: str = "unknown"
    load_kwargs: Mapping[str, Any] = field(default_factory=dict)
    call_kwargs: Mapping[str, Any] = field(default_factory=dict)
    aliases: tuple = ()
    notes: tuple = ()

    @property
    def primary_checkpoint_uri(self) -> str:
        for ref in self.checkpoints:
            if ref.role in ("primary", "base", "checkpoint"):
                return ref.uri
        return self.checkpoints[0].uri if self.checkpoints else ""

    def checkpoint_map(self) -> dict:
        return {ref.role: ref.uri for ref in self.checkpoints}

    def to_dict(self) -> dict:
        d = asdict(self)
        d["model_ref"] = self.primary_checkpoint_uri
        d["checkpoint_map"] = self.checkpoint_map()
        return d


@dataclass(frozen=True)
class InferenceFieldSpec:
    field_id: str
    label: str
    kind: str = "string"
    target: str = "call_kwargs"
    required: bool = False
    default: Any = None
    choices: tuple = ()
    description: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class InferenceArtifactSpec:
    artifact_id: str
    kind: str
    required: bool = False
    preview: bool = False
    description: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class InferenceTaskProfile:
    task_id: str
    label: str
    inputs: tuple
    outputs: tuple
    description: str = ""
    default_call_kwargs: Mapping[str, Any] = field(default_factory=dict)
    aliases: tuple = ()

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class ModelInferenceSpec:
    model_family_id: str
    display_name: str
    variants: tuple
    tasks: tuple
    default_variant_id: str = "default"
    default_task_id: str = "default"
    aliases: tuple = ()
    notes: tuple = ()

    def to_dict(self) -> dict:
        d = asdict(self)
        d["variants"] = [v.to_dict() for v in self.variants]
        return d


spec = ModelInferenceSpec(
    model_family_id="my-world-model",
    display_name="My World Model",
    variants=(
        InferenceVariantSpec(
            "default", "Default",
            checkpoints=(InferenceCheckpointRef("model", "my-world-model.pt"),
                         InferenceCheckpointRef("config", "config.json", required=False)),
            status="available", load_kwargs={"dtype": "bfloat16"}, notes=("480p",)),
        InferenceVariantSpec(
            "fast", "Fast", checkpoints=(InferenceCheckpointRef("model", "fast.pt"),),
            call_kwargs={"steps": 4}, aliases=("turbo",)),
    ),
    tasks=(
        InferenceTaskProfile(
            "text-to-video", "Text to video",
            inputs=(
                InferenceFieldSpec("prompt", "Prompt", required=True, description="What to show."),
                InferenceFieldSpec("seed", "Seed", kind="int", default=0),
                InferenceFieldSpec("guidance", "Guidance", kind="float", default=7.5),
                InferenceFieldSpec("mode", "Mode", choices=("fast", "quality"), default="fast"),
                InferenceFieldSpec("loop", "Loop", kind="bool", default=False),
            ),
            outputs=(InferenceArtifactSpec("video", "video", required=True, preview=True),
                     InferenceArtifactSpec("info", "json")),
            description="Generates a clip.",
            default_call_kwargs={"seed": 0},
            aliases=("t2v",)),
    ),
    default_task_id="text-to-video",
    notes=("written by the Python runtime",),
)

json.dump(spec.to_dict(), sys.stdout, indent=2)
sys.stdout.write("\n")
