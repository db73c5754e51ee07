"""Silent corruption the tracer reports while code runs, and the look-alikes it must leave alone.

Each scenario is a small function here (the tracer reads its source), run under `trace()`; the
reports are checked by kind, line and wording. The look-alikes are the idioms a callee's write
is *meant* for (a buffer filled, a call made for its effect, a rebinding `x = act(x)`), which a
report there would make noise of.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow  # runs torch

torch = pytest.importorskip("torch")

from conftest import source_line  # noqa: E402
from torch import nn  # noqa: E402

from torchlint_inplace.runtime import InplaceCulpritError, trace  # noqa: E402


def _reports(run) -> list:
    with trace() as tracer:
        run()
    return tracer.reports


class Residual(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.act = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc(x)
        out = self.act(h)
        return out + h


class Rebinding(Residual):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc(x)
        h = self.act(h)
        return h + 1


def test_inplace_module_output_added_to_its_input_names_write_read_and_build_lines() -> None:
    with trace() as tracer:
        model = Residual()
        model(torch.randn(2, 4)).sum().backward()
    [report] = tracer.reports
    forward = Residual.forward
    assert (report.kind, report.rule, report.name) == ("caller-reads-written", "TIP004", "h")
    assert (
        report.write.line == source_line(forward, "out = self.act(h)") and report.write.function == "Residual.forward"
    )
    [read] = report.related
    assert read.site.line == source_line(forward, "return out + h")
    assert report.built.site.line == source_line(Residual.__init__, "self.act = nn.ReLU(inplace=True)")
    assert "reads `h` again at line" in report.summary and "`ReLU`" in report.summary
    text = report.render()
    assert f"test_runtime_silent.py:{read.site.line}" in text and "inplace=False" in text


def test_rebinding_the_written_name_is_no_stale_read() -> None:
    assert _reports(lambda: Rebinding()(torch.randn(2, 4)).sum().backward()) == []


class EndsInInplaceAct(nn.Module):
    """timm's byobnet `BasicBlock`: `shortcut = x` ... `return self.act(x)`."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(4, 4, 3, padding=1)
        self.conv2 = nn.Conv2d(4, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.shortcut = nn.Identity()
        self.act = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shortcut = x
        x = self.conv1(x)
        x = self.bn(self.conv2(x))
        x = x + self.shortcut(shortcut)
        return self.act(x)


def test_the_next_calls_frame_is_not_the_returned_callers() -> None:
    """A block's frame returned with its `x` written; the next block's frame (of the same code,
    often at the same address: gernet_s was reported until watches held their frames) reads its
    own argument, which is no stale read."""
    stage = lambda: nn.Sequential(*(EndsInInplaceAct() for _ in range(3)))  # noqa: E731
    model = nn.Sequential(nn.Conv2d(3, 4, 3), stage(), stage())
    assert _reports(lambda: model(torch.randn(1, 3, 16, 16)).sum().backward()) == []


def test_module_built_before_tracing_has_no_build_line() -> None:
    model = Residual()
    [report] = _reports(lambda: model(torch.randn(2, 4)))
    assert report.built is None and report.related


def clip(x: torch.Tensor) -> torch.Tensor:
    x.clamp_(-0.5, 0.5)
    return x


def add_into(x: torch.Tensor, y: torch.Tensor) -> None:
    x += y


def fill(buffer: torch.Tensor) -> float:
    buffer.fill_(3.0)
    return 0.5


def zero_then_use(labels: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
    labels.zero_()
    return scores[torch.arange(len(labels)), labels].sum()


def scale_(x: torch.Tensor) -> torch.Tensor:
    return x.mul_(2.0)


def reread_after_clip() -> torch.Tensor:
    x = torch.randn(3)
    out = clip(x)
    return out + x


def reread_in_the_calling_statement() -> torch.Tensor:
    x = torch.randn(3)
    return clip(x) + x


def result_used_in_the_calling_statement() -> torch.Tensor:
    x = torch.randn(3)
    before = x * 2 + clip(x)
    return clip(x) * 2 + before


def statement_call_then_read() -> torch.Tensor:
    x, y = torch.randn(3), torch.randn(3)
    add_into(x, y)
    return x * 2


def other_alias_of_a_statement_call() -> torch.Tensor:
    x, y = torch.randn(3), torch.randn(3)
    kept = x
    add_into(x, y)
    return kept * 2


def buffer_filled_then_read() -> torch.Tensor:
    buffer = torch.zeros(3)
    weight = fill(buffer)
    return buffer * weight


def labels_zeroed_then_read() -> torch.Tensor:
    labels, scores = torch.tensor([1, 2, 0]), torch.randn(3, 3)
    loss = zero_then_use(labels, scores)
    return (scores.argmax(1) == labels).float().mean() + loss


def trailing_underscore_helper_then_read() -> torch.Tensor:
    x = torch.randn(3)
    y = scale_(x)
    return x + y


@pytest.mark.parametrize(
    ("scenario", "read"),
    [
        (reread_after_clip, "return out + x"),
        (reread_in_the_calling_statement, "return clip(x) + x"),
        (other_alias_of_a_statement_call, "return kept * 2"),
        (labels_zeroed_then_read, "return (scores.argmax(1) == labels).float().mean() + loss"),
    ],
    ids=lambda value: getattr(value, "__name__", None),
)
def test_caller_reading_what_its_callee_wrote_is_reported_at_the_read(scenario, read: str) -> None:
    [report] = _reports(scenario)
    assert report.kind == "caller-reads-written" and report.rule == "TIP007"
    assert report.write.function in ("clip", "add_into", "zero_then_use")
    assert report.related[0].site.line == source_line(scenario, read)
    assert "its caller" in report.summary


@pytest.mark.parametrize(
    "scenario",
    [
        result_used_in_the_calling_statement,
        statement_call_then_read,
        buffer_filled_then_read,
        trailing_underscore_helper_then_read,
    ],
    ids=lambda value: value.__name__,
)
def test_a_callee_write_the_caller_asked_for_is_not_reported(scenario) -> None:
    """The result used (not the stale name), a call made for its effect, a buffer filled (the
    callee neither returns nor reads it), a helper whose name says it writes."""
    assert _reports(scenario) == []


class FlipMask(nn.Module):
    """RibonanzaNet's attention: turns the 0/1 padding mask it is passed into -1/1, in place."""

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        mask[mask == 0] = -1
        return x * mask.unsqueeze(-1)


class Layer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.attend = FlipMask()

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.attend(x * mask.unsqueeze(-1), mask)


def layers_share_a_mask() -> torch.Tensor:
    layers = [Layer(), Layer()]
    x, mask = torch.randn(2, 3, 4), torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    for layer in layers:
        x = layer(x, mask)
    return x


def test_the_next_iteration_of_a_callers_loop_is_a_later_read_two_frames_up() -> None:
    [report] = _reports(layers_share_a_mask)
    assert report.write.line == source_line(FlipMask.forward, "mask[mask == 0] = -1") and report.rule == "TIP007"
    assert report.related[0].site.line == source_line(layers_share_a_mask, "x = layer(x, mask)")
    assert report.related[0].site.function == "layers_share_a_mask"


def keep_in_a_dict_by_device() -> torch.Tensor:
    saved = {}
    x = torch.randn(4)
    saved[x.device] = x
    scale_in_place(x)
    return torch.cat([saved[device] for device in saved])


def scale_in_place(x: torch.Tensor) -> torch.Tensor:
    x.mul_(2.0)
    return x


def test_a_container_holding_the_tensor_under_another_key_is_an_alias() -> None:
    [report] = _reports(keep_in_a_dict_by_device)
    assert report.name == "saved" and report.related[0].site.line == source_line(
        keep_in_a_dict_by_device, "return torch.cat([saved[device] for device in saved])"
    )


def shift_then_activate(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    x += bias
    return torch.nn.functional.relu(x, inplace=True)


def shifted_x_returned() -> torch.Tensor:
    x = torch.randn(3)
    y = shift_then_activate(x, torch.ones(3))  # noqa: F841 (bound, so not a call made for its effect)
    return x


def shifted_x_read_again() -> torch.Tensor:
    x = torch.randn(3)
    y = shift_then_activate(x, torch.ones(3))
    return x * 2 + y


def shifted_result_returned() -> tuple[torch.Tensor, torch.Tensor]:
    x, other = torch.randn(3), torch.randn(3)
    pair = (x, other)
    y = shift_then_activate(x, torch.ones(3))
    return y, pair[1]


def test_returning_the_written_tensor_is_the_callers_later_read() -> None:
    """A caller that only returns the tensor its callee wrote (no op reads it) hands the written
    values on; the callee is known to have meant the write because it returned the tensor (a
    call's result, not a name: seen only at run time)."""
    reports = _reports(shifted_x_returned)
    report = next(report for report in reports if report.rule == "TIP007")
    assert report.write.line == source_line(shift_then_activate, "x += bias")
    assert report.related[0].role == "`x` returned"
    assert report.related[0].site.line == source_line(shifted_x_returned, "return x")
    assert "returns the same tensor as `x`" in report.summary and "whoever it returns to" in report.summary
    relu = next(report for report in reports if report.rule == "TIP004")
    assert relu.write.line == source_line(shift_then_activate, "return torch.nn.functional.relu(x, inplace=True)")
    [read] = [report for report in _reports(shifted_x_read_again) if report.rule == "TIP007"]
    assert read.related[0].site.line == source_line(shifted_x_read_again, "return x * 2 + y")


def test_returning_the_result_or_another_element_is_no_read() -> None:
    assert _reports(shifted_result_returned) == []


class Images:
    """A dataset keeping its images in memory and transforming each on access."""

    def __init__(self, transform) -> None:
        self.data = torch.rand(4, 2, 3)
        self.transform = transform

    def __getitem__(self, index: int) -> torch.Tensor:
        image = self.data[index]
        image = self.transform(image)
        return image


def normalize(image: torch.Tensor) -> torch.Tensor:
    image.sub_(0.5).div_(0.2)
    return image


def normalize_a_copy(image: torch.Tensor) -> torch.Tensor:
    image = image.clone()
    image.sub_(0.5).div_(0.2)
    return image


def test_an_objects_kept_tensor_written_by_a_callee_is_reported_at_its_next_read() -> None:
    images = Images(normalize)
    [report] = _reports(lambda: (images[0], images[1], images[0]))
    assert (report.kind, report.rule, report.name) == ("state-read-again", "TIP007", "self.data")
    assert report.write.line == source_line(normalize, "image.sub_(0.5).div_(0.2)")
    handed, read = report.related
    assert handed.site.line == source_line(Images.__getitem__, "image = self.transform(image)")
    assert read.site.line == source_line(Images.__getitem__, "image = self.data[index]")
    assert "`Images` keeps as `self.data`" in report.summary and report.tensor.shape == (2, 3)
    assert report.to_dict()["kind"] == "state-read-again"


def test_other_elements_of_a_kept_tensor_or_a_copy_written_are_not_reported() -> None:
    images = Images(normalize)
    assert _reports(lambda: [images[index] for index in range(4)]) == [], "each image read once"
    copying = Images(normalize_a_copy)
    assert _reports(lambda: (copying[0], copying[0])) == []


def test_overlapping_operand_is_reported_and_disjoint_or_identical_operands_are_not() -> None:
    def centre() -> None:
        x = torch.arange(12.0).reshape(3, 4)
        x -= x[:, :1]
        y = torch.arange(12.0).reshape(3, 4)
        y[:, 1:] -= y[:, :1]
        z = torch.randn(4)
        z.mul_(z)

    [report] = _reports(centre)
    assert (report.kind, report.name, report.rule) == ("overlapping-operand", "x", "TIP003")
    assert report.write.line == source_line(centre, "x -= x[:, :1]") and "order" in report.summary


class DataClipped(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(3, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = torch.sigmoid(self.fc(x))
        s.data.clamp_(0.2, 0.8)
        return s


def test_data_write_into_a_saved_tensor_is_reported_when_backward_reads_it() -> None:
    model, x = DataClipped(), torch.randn(2, 3)
    assert _reports(lambda: model(x)) == [], "no backward read the written values"
    [report] = _reports(lambda: model(x).sum().backward())
    forward = DataClipped.forward
    assert (report.kind, report.rule, report.name) == ("hidden-write", "TIP008", "s.data")
    assert report.write.line == source_line(forward, "s.data.clamp_(0.2, 0.8)")
    assert (
        report.related[0].site.line == source_line(forward, "s = torch.sigmoid(self.fc(x))")
        and "sigmoid" in report.summary
    )


def test_detached_write_into_a_saved_tensor_still_raises() -> None:
    """`.detach()` shares the version counter: autograd sees the write, so it is an error, not a report."""
    x = torch.randn(3, requires_grad=True)
    with pytest.raises(InplaceCulpritError), trace() as tracer:
        s = x.sigmoid()
        s.detach().zero_()
        s.sum().backward()
    assert tracer.reports == []


class Table(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(4, 3))

    def forward(self, idx: int) -> torch.Tensor:
        return self.weight[idx]

    def zero_row(self, idx: int) -> None:
        self.weight[idx] = 0.0


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.table = Table()


def erase(row: torch.Tensor) -> None:
    row[:] = 0.0


def test_write_into_a_parameter_through_a_handed_view_is_reported_but_not_through_its_module() -> None:
    model = Model()

    def hooked() -> None:
        with torch.no_grad():
            erase(model.table(1))
            model.table.zero_row(2)

    [report] = _reports(hooked)
    assert (report.kind, report.name, report.rule) == ("parameter-view-write", "table.weight", "TIP002")
    assert report.write.line == source_line(erase, "row[:] = 0.0")
    assert report.related[0].site.line == source_line(hooked, "erase(model.table(1))")


def test_a_torch_module_writing_its_own_parameter_is_not_a_handed_view() -> None:
    """`nn.Embedding(padding_idx=...)` zeroes its padding row (a view of its weight) as it is built."""
    assert _reports(lambda: nn.Embedding(5, 3, padding_idx=4)) == []


def keeps_input(store: dict):
    def hook(module, inputs, output):
        store["input"] = inputs[0]

    return hook


def keeps_output(store: dict):
    def hook(module, inputs, output):
        store["output"] = output

    return hook


def test_forward_hooks_of_an_inplace_module_reading_its_input_are_reported() -> None:
    def run(make_hook) -> list:
        relu = nn.ReLU(inplace=True)
        relu.register_forward_hook(make_hook({}))
        x = torch.randn(4)
        return _reports(lambda: relu(x))

    [report] = run(keeps_input)
    assert (report.kind, report.rule) == ("hook-sees-written-input", "TIP004")
    assert report.related[0].site.line == source_line(keeps_input, "def hook(module, inputs, output):")
    assert run(keeps_output) == [], "a hook that looks at the output only"


def test_a_loop_repeating_a_corruption_is_one_report_counted() -> None:
    model = Residual()

    def loop() -> None:
        for _ in range(3):
            model(torch.randn(2, 4))

    [report] = _reports(loop)
    assert report.count == 3 and "(3 times)" in report.render()


def test_training_loop_with_optimizer_init_batchnorm_and_inplace_activations_is_not_reported() -> None:
    def train() -> None:
        model = nn.Sequential(
            nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Dropout(0.1, inplace=True), nn.ReLU(inplace=True), nn.Linear(8, 1)
        )
        nn.init.zeros_(model[4].bias)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        for _ in range(3):
            loss = model(torch.randn(5, 4)).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()

    assert _reports(train) == []


def test_report_as_data() -> None:
    [report] = _reports(lambda: Residual()(torch.randn(2, 4)))
    data = report.to_dict()
    assert data["kind"] == "caller-reads-written" and data["rule"] == "TIP004" and data["count"] == 1
    assert data["tensor"] == {"name": "h", "shape": [2, 4], "dtype": "float32", "device": "cpu"}
    assert data["write"]["code"] == "out = self.act(h)" and data["built"]["code"] == "self.act = nn.ReLU(inplace=True)"
    assert [related["code"] for related in data["related"]] == ["return out + h"]
