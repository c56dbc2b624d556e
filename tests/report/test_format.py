from katib_progress.report import _format as f


def test_parameter_values_are_shortened_for_people_but_not_changed_otherwise() -> None:
    assert f.param_value("0.2570359838212636") == "0.257"
    assert f.param_value("1.5e-05") == "1.5e-05"
    assert f.param_value("119") == "119"  # ints untouched
    assert f.param_value("adam") == "adam"  # categoricals untouched
    assert f.param_value("v1.2.beta") == "v1.2.beta"  # dotted text that is not a number
    assert f.params({"lr": "0.123456789", "opt": "sgd"}) == "lr=0.1235, opt=sgd"
