"""course_enrollment: every tool, its success path, resulting state and declared errors, in a real sandbox."""

import pytest

from toolzoo.testing import DomainHarness


@pytest.fixture(scope="module")
def h():
    with DomainHarness("course_enrollment") as harness:
        yield harness


@pytest.fixture(autouse=True)
def fresh(h):
    h.reset()


def test_search_course_catalog(h):
    r = h.ok("search_course_catalog", {})
    assert len(r["courses"]) == 8 and r["term"] == "2025-spring"
    cs = h.ok("search_course_catalog", {"department": "CS"})["courses"]
    assert [c["course_id"] for c in cs] == ["CS101", "CS201", "CS301"]
    open_ids = [c["course_id"] for c in h.ok("search_course_catalog", {"only_open_seats": True})["courses"]]
    assert "CS201" not in open_ids and "CS101" in open_ids
    h.err("search_course_catalog", {"department": "BIO"}, kind="invalid_arguments")


def test_get_course_section(h):
    r = h.ok("get_course_section", {"course_id": "CS201"})
    assert r["seats_left"] == 0 and r["waitlist_length"] == 1 and r["prerequisites"] == ["CS101"]
    assert r["instructor"].startswith("Prof. ")
    h.err("get_course_section", {"course_id": "CS999"}, code="course_not_found")


def test_get_student_transcript(h):
    r = h.ok("get_student_transcript", {"student_id": "S-1007"})
    assert r["credit_load"] == 10 and r["max_credits"] == 12
    assert {c["course_id"] for c in r["current_courses"]} == {"HIST110", "MATH201", "PHYS101"}
    r = h.ok("get_student_transcript", {"student_id": "S-1005"})
    assert r["waitlists"] == [{"course_id": "CS201", "position": 1}] and r["gpa"] is not None
    assert h.ok("get_student_transcript", {"student_id": "S-1008"})["gpa"] is None
    h.err("get_student_transcript", {"student_id": "S-1"}, code="student_not_found")


def test_check_enrollment_eligibility(h):
    r = h.ok("check_enrollment_eligibility", {"student_id": "S-1008", "course_id": "CS101"})
    assert r["eligible"] is True and r["reasons"] == []
    r = h.ok("check_enrollment_eligibility", {"student_id": "S-1006", "course_id": "CS201"})
    assert r["eligible"] is False
    assert [x["code"] for x in r["reasons"]] == ["prerequisites_not_met", "course_full"]
    r = h.ok("check_enrollment_eligibility", {"student_id": "S-1007", "course_id": "CS201"})
    assert [x["code"] for x in r["reasons"]] == ["credit_limit_exceeded", "course_full"]
    h.err("check_enrollment_eligibility", {"student_id": "S-0", "course_id": "CS101"}, code="student_not_found")
    h.err("check_enrollment_eligibility", {"student_id": "S-1008", "course_id": "XX"}, code="course_not_found")


def test_enroll_student_in_course(h):
    r = h.ok("enroll_student_in_course", {"student_id": "S-1008", "course_id": "CS101"})
    assert r["status"] == "enrolled" and r["credit_load"] == 4
    assert "S-1008" in h.state()["courses"]["CS101"]["enrolled"]
    h.err("enroll_student_in_course", {"student_id": "S-1008", "course_id": "CS101"}, code="already_enrolled")
    h.err("enroll_student_in_course", {"student_id": "S-1001", "course_id": "CS101"}, code="already_completed")
    h.err("enroll_student_in_course", {"student_id": "S-1001", "course_id": "CS301"}, code="prerequisites_not_met")
    h.err("enroll_student_in_course", {"student_id": "S-1006", "course_id": "CS201"}, code="prerequisites_not_met")
    h.ok("enroll_student_in_course", {"student_id": "S-1007", "course_id": "ART120"})  # 12 credits: at the limit
    assert h.state()["courses"]["ART120"]["enrolled"] == ["S-1007"]
    h.err("enroll_student_in_course", {"student_id": "S-1007", "course_id": "CS201"}, code="credit_limit_exceeded")
    h.err("enroll_student_in_course", {"student_id": "S-1001", "course_id": "CS201"}, code="course_full")
    h.err("enroll_student_in_course", {"student_id": "S-9999", "course_id": "CS101"}, code="student_not_found")
    h.err("enroll_student_in_course", {"student_id": "S-1008", "course_id": "CS000"}, code="course_not_found")
    h.err("enroll_student_in_course", {"student_id": "S-1008"}, kind="invalid_arguments")


def test_join_course_waitlist(h):
    r = h.ok("join_course_waitlist", {"student_id": "S-1001", "course_id": "CS201"})
    assert r["position"] == 2
    assert h.state()["courses"]["CS201"]["waitlist"] == ["S-1005", "S-1001"]
    h.err("join_course_waitlist", {"student_id": "S-1001", "course_id": "CS201"}, code="already_enrolled")
    h.err("join_course_waitlist", {"student_id": "S-1006", "course_id": "CS201"}, code="prerequisites_not_met")
    h.err("join_course_waitlist", {"student_id": "S-1008", "course_id": "CS101"}, code="course_not_full")
    h.ok("enroll_student_in_course", {"student_id": "S-1008", "course_id": "ART120"})
    h.ok("enroll_student_in_course", {"student_id": "S-1006", "course_id": "ART120"})
    h.ok("post_course_grade", {"instructor_id": "I-5", "course_id": "ART120", "student_id": "S-1006", "grade": "A"})
    h.err("join_course_waitlist", {"student_id": "S-1006", "course_id": "ART120"}, code="already_enrolled")
    h.err("join_course_waitlist", {"student_id": "S-1002", "course_id": "CS101"}, code="already_completed")
    h.err("join_course_waitlist", {"student_id": "S-77", "course_id": "CS201"}, code="student_not_found")
    h.err("join_course_waitlist", {"student_id": "S-1001", "course_id": "ZZ1"}, code="course_not_found")


def test_drop_course_enrollment_promotes_waitlist(h):
    r = h.ok("drop_course_enrollment", {"student_id": "S-1002", "course_id": "CS201"})
    assert r["status"] == "dropped" and r["promoted"] == "S-1005"
    c = h.state()["courses"]["CS201"]
    assert "S-1002" not in c["enrolled"] and "S-1005" in c["enrolled"] and c["waitlist"] == []
    h.err("drop_course_enrollment", {"student_id": "S-1002", "course_id": "CS201"}, code="not_enrolled")


def test_drop_course_enrollment_skips_over_limit_and_waitlist(h):
    h.ok("join_course_waitlist", {"student_id": "S-1007", "course_id": "CS201"})
    h.ok("join_course_waitlist", {"student_id": "S-1001", "course_id": "CS201"})
    assert h.state()["courses"]["CS201"]["waitlist"] == ["S-1005", "S-1007", "S-1001"]
    r = h.ok("drop_course_enrollment", {"student_id": "S-1005", "course_id": "CS201"})  # leaves the waitlist
    assert r["status"] == "left_waitlist"
    assert h.state()["courses"]["CS201"]["waitlist"] == ["S-1007", "S-1001"]
    # S-1007 (10 of 12 credits) cannot take the 4-credit seat, so S-1001 behind them gets it
    r = h.ok("drop_course_enrollment", {"student_id": "S-1003", "course_id": "CS201"})
    assert r["promoted"] == "S-1001"
    c = h.state()["courses"]["CS201"]
    assert c["waitlist"] == ["S-1007"] and "S-1001" in c["enrolled"] and len(c["enrolled"]) == 3
    h.err("drop_course_enrollment", {"student_id": "S-1003", "course_id": "HIST110"}, code="grade_posted")
    h.err("drop_course_enrollment", {"student_id": "S-404", "course_id": "HIST110"}, code="student_not_found")
    h.err("drop_course_enrollment", {"student_id": "S-1003", "course_id": "HIST999"}, code="course_not_found")


def test_post_course_grade(h):
    r = h.ok("post_course_grade", {"instructor_id": "I-3", "course_id": "MATH201", "student_id": "S-1001", "grade": "B+"})
    assert r["passed"] is True
    s = h.state()
    assert s["courses"]["MATH201"]["grades"]["S-1001"] == "B+" and s["students"]["S-1001"]["completed"]["MATH201"] == "B+"
    assert h.ok("post_course_grade", {"instructor_id": "I-3", "course_id": "MATH201", "student_id": "S-1007",
                                      "grade": "D"})["passed"] is False
    h.err("post_course_grade", {"instructor_id": "I-3", "course_id": "MATH201", "student_id": "S-1001", "grade": "A"},
          code="grade_already_posted")
    h.err("post_course_grade", {"instructor_id": "I-1", "course_id": "MATH201", "student_id": "S-1001", "grade": "A"},
          code="not_instructor")
    h.err("post_course_grade", {"instructor_id": "I-3", "course_id": "MATH201", "student_id": "S-1008", "grade": "A"},
          code="not_enrolled")
    h.err("post_course_grade", {"instructor_id": "I-3", "course_id": "MATH999", "student_id": "S-1001", "grade": "A"},
          code="course_not_found")
    h.err("post_course_grade", {"instructor_id": "I-3", "course_id": "MATH201", "student_id": "S-1007", "grade": "E"},
          kind="invalid_arguments")
