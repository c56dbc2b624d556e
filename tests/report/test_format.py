from katib_progress.report import _format as f


def test_parameter_values_are_shortened_for_people_but_not_changed_otherwise() -> None:
    assert f.param_value("0.2570359838212636") == "0.257"
    assert f.param_value("1.5e-05") == "1.5e-05"
    assert f.param_value("119") == "119"  # ints untouched
    assert f.param_value("adam") == "adam"  # categoricals untouched
    assert f.param_value("v1.2.beta") == "v1.2.beta"  # dotted text that is not a number
    assert f.params({"lr": "0.123456789", "opt": "sgd"}) == "lr=0.1235, opt=sgd"


def test_curve_axis_goes_logarithmic_only_for_positive_values_spanning_two_decades() -> None:
    from katib_progress.report._figures import wants_log_axis

    assert wants_log_axis([0.07, 0.2, 22.8])
    assert not wants_log_axis([0.07, 0.2, 2.4])  # one decade: linear reads better
    assert not wants_log_axis([-1.0, 0.5, 300.0])  # non-positive values cannot go on a log axis
    assert not wants_log_axis([None, float("nan")])
