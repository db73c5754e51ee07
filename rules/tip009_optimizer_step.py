from torchlint_inplace.analysis.model import Form
from torchlint_inplace.rule import FormRule


class OptimizerStepBetweenBackwards(FormRule):
    code = "TIP009"
    name = "optimizer-step-before-backward"
    form = Form.OPTIMIZER_STEP
    summary = (
        "`optimizer.step()` between a `backward(retain_graph=True)` and a later `backward()` through the same graph."
    )
    why = (
        "`step()` updates parameters in place. A graph kept alive with `retain_graph=True` saved those parameters "
        "(every `Linear`/`Conv` saves its weight when its input requires grad); the next backward() through it "
        "raises '... modified by an inplace operation'. The classic shape is a GAN loop that steps the "
        "discriminator before backpropagating the generator loss through the same `D(fake)`."
    )
    bad = """\
loss_d.backward(retain_graph=True)
opt_d.step()            # TIP009: rewrites D's weights that d_fake's graph saved
loss_g = -d_fake.mean()
loss_g.backward()
"""
    good = """\
loss_d.backward(retain_graph=True)
loss_g = -d_fake.mean()
loss_g.backward()
opt_d.step()            # step after every backward through the shared graph
"""
    fix_doc = "No automatic fix: reorder the steps after the last backward, or recompute the forward after stepping."
    fix_brief = "none: where an optimizer step belongs is a modelling decision"
    brief = "`optimizer.step()` between a forward and a later `backward()` on the same graph"
