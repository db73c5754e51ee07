"""Golden input: one hazard of each common form, with related locations and fixes."""

import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)
        self.act = nn.ReLU(inplace=True)

    def forward(self, x):
        identity = x
        out = self.act(x)
        return self.conv(out) + identity


class Gate(nn.Module):
    def forward(self, x, w):
        h = torch.sigmoid(x)
        h.mul_(2)
        y = x * w
        w[:, 0] = 0
        z = torch.exp(y)
        z += 1
        return h, z
