import pytest

from elu_study.core.hardware import SHAPE, bytes_moved, floor_ms, gpu_spec, tbps
from elu_study.core.record import slug


def test_problem_bytes_match_the_brief():
    numel = SHAPE[0] * SHAPE[1]
    assert numel == 1_610_612_736
    assert bytes_moved(numel) == 12_884_901_888


@pytest.mark.parametrize(
    "device_name, peak, floor",
    [
        ("NVIDIA H100 80GB HBM3", 3.35e12, 3.846),  # the brief's 3.84 ms
        ("NVIDIA H200", 4.8e12, 2.684),
        ("NVIDIA H200 NVL", 4.8e12, 2.684),
    ],
)
def test_floor_of_known_gpus(device_name, peak, floor):
    spec = gpu_spec(device_name)
    assert spec.peak_bytes_per_s == peak
    assert floor_ms(SHAPE[0] * SHAPE[1], spec.peak_bytes_per_s) == pytest.approx(floor, abs=5e-4)


@pytest.mark.parametrize(
    "device_name, label",
    [
        ("NVIDIA H100 PCIe", "H100 PCIe"),
        ("NVIDIA H100 NVL", "H100 NVL"),
        ("NVIDIA H100 80GB HBM3", "H100 SXM"),
        ("NVIDIA GH200 480GB", "GH200 (HBM3)"),
        ("NVIDIA A100-SXM4-80GB", "A100 80GB SXM"),
        ("NVIDIA A100 80GB PCIe", "A100 80GB PCIe"),
        ("NVIDIA A100-SXM4-40GB", "A100 40GB"),
        ("NVIDIA L4", "L4"),
        ("NVIDIA L40S", "L40S"),
    ],
)
def test_specific_names_win_over_family_names(device_name, label):
    assert gpu_spec(device_name).label == label


def test_unknown_gpu_has_no_floor_unless_given(monkeypatch):
    monkeypatch.delenv("ELU_STUDY_PEAK_TBPS", raising=False)
    assert gpu_spec("Some Future GPU") is None
    monkeypatch.setenv("ELU_STUDY_PEAK_TBPS", "2.5")
    spec = gpu_spec("Some Future GPU")
    assert spec.peak_bytes_per_s == 2.5e12 and "ELU_STUDY_PEAK_TBPS" in spec.source


def test_bandwidth_is_bytes_over_time():
    numel = SHAPE[0] * SHAPE[1]
    assert tbps(numel, floor_ms(numel, 4.8e12)) == pytest.approx(4.8)
    assert tbps(numel, 3.04) == pytest.approx(4.2385, abs=1e-3)  # copy_ on the H200, per REFERENCE.md


def test_slug_names_result_files():
    assert slug("NVIDIA H200") == "nvidia-h200"
    assert slug("NVIDIA H100 80GB HBM3") == "nvidia-h100-80gb-hbm3"
