# A "training script" for the fake torch: six optimizer steps.
import sys
import torch.optim

opt = torch.optim.Optimizer()
for step in range(6):
    opt.step()
print("trained", sys.argv[1:])
