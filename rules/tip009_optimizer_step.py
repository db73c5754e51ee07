from torchlint_inplace.analysis.model import Form
from torchlint_inplace.rule import FormRule


class OptimizerStepBetweenBackwards(FormRule):
    code = "TIP009"
    name = "optimizer-step-before-backward"
    form = Form.OPTIMIZER_STEP
    summary = (
        "`optimizer.step()` after a loss was computed through the parameters it updates, and before that loss's "
        "`backward()`."
    )
    why = (
        "`step()` updates the optimizer's parameters in place. A loss computed before the step through those "
        "parameters saved them (every `Linear`/`Conv` saves its weight when its input requires grad), so its "
        "backward() after the step raises '... modified by an inplace operation', with or without "
        "`retain_graph=True`. The classic shapes: a GAN loop that steps the discriminator before backpropagating "
        "the generator loss through the same `D(fake)`; actor-critic code that steps the critic between two "
        "losses built from one forward; a generator output computed once outside a loop that steps it. The "
        "analysis links each optimizer to the parameters it was built with and each loss to the saves its graph "
        "went through; for an optimizer it cannot see, only a graph kept alive by `backward(retain_graph=True)` "
        "counts. A loss recomputed after the step saves the new versions and is fine. The same in-place update "
        "silently changes a `state_dict()` kept as a snapshot (`best = model.state_dict()` in an epoch loop: its "
        "tensors are the parameters, so loading it after training loads the last weights); that finding is on "
        "the `state_dict()` call, and a `copy.deepcopy` of it is the fix. `model.load_state_dict(weights)` "
        "copies into the parameters in place as a step does: MAML code that resets the adapted weights before the "
        "meta-loss's backward() raises the same way. `copy.copy(model)` is another object on the same "
        "parameters: an optimizer over the copy trains the original, which its holders then read with the "
        'trained weights (a "fresh" model per epoch that starts from the last); that finding is on the '
        "`copy.copy` call, and `copy.deepcopy` is the fix."
    )
    bad = """\
import torch
from torch import nn

G, D = nn.Linear(4, 8), nn.Linear(8, 1)
opt_d = torch.optim.Adam(D.parameters())
d_fake = D(G(torch.randn(2, 4)))
loss_d = d_fake.mean()
loss_d.backward(retain_graph=True)
opt_d.step()            # TIP009: rewrites D's weights that d_fake's graph saved
loss_g = -d_fake.mean()
loss_g.backward()
"""
    good = """\
import torch
from torch import nn

G, D = nn.Linear(4, 8), nn.Linear(8, 1)
opt_d = torch.optim.Adam(D.parameters())
d_fake = D(G(torch.randn(2, 4)))
loss_d = d_fake.mean()
loss_d.backward(retain_graph=True)
loss_g = -d_fake.mean()
loss_g.backward()
opt_d.step()            # step after every backward through the shared graph
"""
    fix_doc = "No automatic fix: reorder the steps after the last backward, or recompute the forward after stepping."
    fix_brief = "none: where an optimizer step belongs is a modelling decision"
    brief = "`optimizer.step()` between a forward and a later `backward()` on the same graph"
