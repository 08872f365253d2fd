"""The CNN example's model, records and decoder, shared by train.py (primus.train) and
train_loop.py (the same training written out as a loop).

A record is 261 bytes: its number (uint32, little-endian), its class (one byte, 0-3) and a
16x16 grayscale image (256 bytes). make_data.py writes them into TFRecord files.
"""

import numpy as np
import torch
from torch import nn

SIDE = 16
CLASSES = 4
HEADER = 5  # record number (4 bytes) and class (1 byte)
RECORD_BYTES = HEADER + SIDE * SIDE


class SmallCNN(nn.Module):
    """Two convolutions with batch norm, global pooling, dropout and a linear classifier."""

    def __init__(self, classes=CLASSES):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1))
        self.classifier = nn.Sequential(nn.Flatten(), nn.Dropout(0.25), nn.Linear(16, classes))

    def forward(self, images):
        return self.classifier(self.features(images))


def record_number(record):
    """The number make_data.py gave the record (0, 1, 2, ... in the order written)."""
    return int.from_bytes(record[:4], "little")


def decode(record):
    """(image, class): a float tensor of shape (1, 16, 16) in [0, 1], and an int64 scalar."""
    if len(record) != RECORD_BYTES:
        raise ValueError(f"a CNN example record has {RECORD_BYTES} bytes, this one {len(record)}")
    pixels = np.frombuffer(record, dtype=np.uint8, offset=HEADER).astype(np.float32) / 255.0
    return torch.from_numpy(pixels.reshape(1, SIDE, SIDE)), torch.tensor(record[4])


def make_record(number, rng):
    """Record `number`: a class and a noisy image of that class's pattern (horizontal stripes,
    vertical stripes, diagonals or a checkerboard, each at a random phase)."""
    label = int(rng.integers(CLASSES))
    y, x = np.mgrid[0:SIDE, 0:SIDE]
    phase = rng.integers(4)
    pattern = [(y + phase) // 2 % 2, (x + phase) // 2 % 2, (x + y + phase) // 3 % 2,
               ((x + phase) // 4 + (y + phase) // 4) % 2][label]
    image = np.clip(pattern * 160 + 40 + rng.normal(0, 40, (SIDE, SIDE)), 0, 255)
    return number.to_bytes(4, "little") + bytes([label]) + image.astype(np.uint8).tobytes()
