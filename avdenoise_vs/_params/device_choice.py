"""Where a call asked to run: Denoise's ``device`` setting, read once into a name and a
device number, with the words of the script's own argument for messages."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DeviceChoice"]


@dataclass(frozen=True)
class DeviceChoice:
    """The device a call asked for.

    Parameters
    ----------
    name : str
        ``'auto'``, ``'cpu'`` or ``'cuda'``.
    index : int, optional
        The CUDA device number (``'cuda:N'``, a drop-in's ``device_id``); None lets the CUDA
        backend pick one.
    said : str
        The argument as the script wrote it, which messages about the device repeat
        (``device='cuda:0'``, ``device_id=0``).
    """

    name: str
    index: int | None = None
    said: str = ""

    @classmethod
    def parse(cls, argument: str, device: str) -> DeviceChoice:
        """A validated ``device`` string (``'auto'``, ``'cpu'``, ``'cuda'``, ``'cuda:N'``) given
        as the argument `argument`."""
        name, _, index = device.partition(":")
        return cls(name, int(index) if index else None, f"{argument}={device!r}")

    @classmethod
    def numbered(cls, argument: str, index: int) -> DeviceChoice:
        """CUDA device `index`, given by number as the argument `argument` (``device_id``)."""
        return cls("cuda", index, f"{argument}={index!r}")

    @property
    def is_auto(self) -> bool:
        """Whether the backend is left to ``accelerators`` (``device='auto'``)."""
        return self.name == "auto"
