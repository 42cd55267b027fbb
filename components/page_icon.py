"""The dashboard's page icon, drawn on this server."""

from __future__ import annotations

import numpy as np

__all__ = ["favicon"]


def favicon():
    """The page icon, drawn here: a ``:material/...:`` or emoji icon makes every visitor's browser
    fetch it from Google's font servers, and nothing should leave this server (docs/safety.md).

    A 32 x 32 RGBA disc in the theme colour with a white balance beam, as a PIL image (served
    by Streamlit from this server).
    """
    from PIL import Image

    yy, xx = np.mgrid[:32, :32]
    disc = (yy - 15.5) ** 2 + (xx - 15.5) ** 2 <= 15.5**2
    img = np.zeros((32, 32, 4), dtype=np.uint8)
    img[disc] = (0x4C, 0x78, 0xA8, 255)
    beam = (np.abs(yy - 11) <= 1) & (np.abs(xx - 15.5) <= 10)
    post = (np.abs(xx - 15.5) <= 1) & (yy >= 11) & (yy <= 24)
    base = (np.abs(yy - 24) <= 1) & (np.abs(xx - 15.5) <= 6)
    img[(beam | post | base) & disc] = (255, 255, 255, 255)
    return Image.fromarray(img)  # (32, 32, 4) uint8: RGBA
