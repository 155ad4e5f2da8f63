from typing import Literal

from toolzoo.dsl import ToolFailure, tool

Grade = Literal["A", "A-", "B+", "B", "B-", "C+", "C", "C-", "D", "F"]
_CE_POINTS = {"A": 4.0, "A-": 3.7, "B+": 3.3, "B": 3.0, "B-": 2.7, "C+": 2.3, "C": 2.0, "C-": 1.7, "D": 1.0, "F": 0.0}


def _ce_student(state, student_id):
    if student_id not in state["students"]:
        raise ToolFailure("student_not_found", f"no student {student_id}; student ids look like S-1001")
    return state["students"][student_id]


def _ce_course(state, course_id):
    if course_id not in state["courses"]:
        raise ToolFailure("course_not_found", f"no course {course_id}; use search_course_catalog")
    return state["courses"][course_id]


def _ce_load(state, student_id):
    return sum(c["credits"] for c in state["courses"].values() if student_id in c["enrolled"])


def _ce_missing_prereqs(state, student, course):
    done = student["completed"]
    return [p for p in course["prerequisites"] if done.get(p) not in state["passing_grades"]]


def _ce_problems(state, student_id, course_id):
    """Every reason (code, message) the student cannot enrol in the course now, in check order."""
    s, c = state["students"][student_id], state["courses"][course_id]
    out = []
    if student_id in c["enrolled"] or student_id in c["waitlist"]:
        where = "enrolled in" if student_id in c["enrolled"] else "on the waitlist of"
        out.append(("already_enrolled", f"{student_id} is already {where} {course_id}"))
    if s["completed"].get(course_id) in state["passing_grades"]:
        out.append(("already_completed", f"{student_id} already passed {course_id} with {s['completed'][course_id]}"))
    missing = _ce_missing_prereqs(state, s, c)
    if missing:
        out.append(("prerequisites_not_met", f"{course_id} needs {missing} passed with C or better"))
    load = _ce_load(state, student_id)
    if load + c["credits"] > s["max_credits"]:
        out.append(("credit_limit_exceeded",
                    f"{student_id} has {load} credits; {course_id} adds {c['credits']}, limit is {s['max_credits']}"))
    if len(c["enrolled"]) >= c["capacity"]:
        out.append(("course_full", f"{course_id} is full ({c['capacity']} seats); offer join_course_waitlist"))
    return out


def _ce_summary(cid, c):
    return {"course_id": cid, "title": c["title"], "credits": c["credits"], "prerequisites": c["prerequisites"],
            "instructor_id": c["instructor_id"], "capacity": c["capacity"],
            "seats_left": max(0, c["capacity"] - len(c["enrolled"])), "waitlist_length": len(c["waitlist"])}


@tool()
def search_course_catalog(state, department: Literal["CS", "MATH", "PHYS", "HIST", "ART", "any"] = "any",
                          only_open_seats: bool = False) -> dict:
    """List this term's courses with credits, prerequisites and free seats.

    Args:
        department: only courses of this department; "any" for all.
        only_open_seats: only courses that still have free seats.
    """
    out = []
    for cid, c in sorted(state["courses"].items()):
        row = _ce_summary(cid, c)
        if department != "any" and not cid.startswith(department):
            continue
        if only_open_seats and row["seats_left"] == 0:
            continue
        out.append(row)
    return {"term": state["term"], "courses": out}


@tool(errors={"course_not_found": "unknown course id"})
def get_course_section(state, course_id: str) -> dict:
    """Show one course: title, credits, prerequisites, instructor, capacity, seats left and waitlist length.

    Args:
        course_id: the course, e.g. "CS201".
    """
    c = _ce_course(state, course_id)
    return {**_ce_summary(course_id, c), "instructor": state["instructors"][c["instructor_id"]]["name"]}


@tool(errors={"student_not_found": "unknown student id"})
def get_student_transcript(state, student_id: str) -> dict:
    """Show a student's record: completed courses with grades and GPA, this term's courses, waitlists and credit load.

    Args:
        student_id: the student, e.g. "S-1001".
    """
    s = _ce_student(state, student_id)
    credits = {cid: c["credits"] for cid, c in state["courses"].items()}
    graded = [(credits.get(cid, 3), _CE_POINTS[g]) for cid, g in s["completed"].items()]
    total = sum(cr for cr, _ in graded)
    gpa = round(sum(cr * p for cr, p in graded) / total, 2) if total else None
    current = [{"course_id": cid, "credits": c["credits"], "grade": c["grades"].get(student_id)}
               for cid, c in sorted(state["courses"].items()) if student_id in c["enrolled"]]
    waitlisted = [{"course_id": cid, "position": c["waitlist"].index(student_id) + 1}
                  for cid, c in sorted(state["courses"].items()) if student_id in c["waitlist"]]
    return {"student_id": student_id, "name": s["name"], "completed": s["completed"], "gpa": gpa,
            "current_courses": current, "waitlists": waitlisted, "credit_load": _ce_load(state, student_id),
            "max_credits": s["max_credits"]}


@tool(errors={"student_not_found": "unknown student id", "course_not_found": "unknown course id"})
def check_enrollment_eligibility(state, student_id: str, course_id: str) -> dict:
    """Check, without changing anything, whether a student can enrol in a course now, and every reason why not.

    Args:
        student_id: the student.
        course_id: the course.
    """
    _ce_student(state, student_id)
    _ce_course(state, course_id)
    problems = _ce_problems(state, student_id, course_id)
    return {"student_id": student_id, "course_id": course_id, "eligible": not problems,
            "reasons": [{"code": code, "message": msg} for code, msg in problems]}


@tool(effect="write", errors={
    "student_not_found": "unknown student id",
    "course_not_found": "unknown course id",
    "already_enrolled": "the student is already enrolled or waitlisted",
    "already_completed": "the student already passed this course",
    "prerequisites_not_met": "a prerequisite was not passed with C or better",
    "credit_limit_exceeded": "the course would take the student over their credit limit",
    "course_full": "no seats left; use the waitlist",
})
def enroll_student_in_course(state, student_id: str, course_id: str) -> dict:
    """Enrol a student in a course with a free seat, if prerequisites and credit limit allow.

    Args:
        student_id: the student, e.g. "S-1008".
        course_id: the course, e.g. "CS101".
    """
    _ce_student(state, student_id)
    c = _ce_course(state, course_id)
    problems = _ce_problems(state, student_id, course_id)
    if problems:
        raise ToolFailure(*problems[0])
    c["enrolled"].append(student_id)
    return {"student_id": student_id, "course_id": course_id, "status": "enrolled",
            "credit_load": _ce_load(state, student_id)}


@tool(effect="write", errors={
    "student_not_found": "unknown student id",
    "course_not_found": "unknown course id",
    "already_enrolled": "the student is already enrolled or waitlisted",
    "already_completed": "the student already passed this course",
    "prerequisites_not_met": "a prerequisite was not passed with C or better",
    "course_not_full": "the course has free seats; enrol directly",
})
def join_course_waitlist(state, student_id: str, course_id: str) -> dict:
    """Put a student at the end of a full course's waitlist (the credit limit is checked when a seat frees up).

    Args:
        student_id: the student.
        course_id: a full course.
    """
    _ce_student(state, student_id)
    c = _ce_course(state, course_id)
    for code, msg in _ce_problems(state, student_id, course_id):
        if code in ("already_enrolled", "already_completed", "prerequisites_not_met"):
            raise ToolFailure(code, msg)
    if len(c["enrolled"]) < c["capacity"]:
        raise ToolFailure("course_not_full", f"{course_id} has {c['capacity'] - len(c['enrolled'])} free seats; enrol instead")
    c["waitlist"].append(student_id)
    return {"student_id": student_id, "course_id": course_id, "status": "waitlisted", "position": len(c["waitlist"])}


@tool(effect="write", errors={
    "student_not_found": "unknown student id",
    "course_not_found": "unknown course id",
    "not_enrolled": "the student is neither enrolled nor waitlisted",
    "grade_posted": "the final grade is posted; the course can no longer be dropped",
})
def drop_course_enrollment(state, student_id: str, course_id: str) -> dict:
    """Drop a course (or leave its waitlist). A freed seat goes to the first waitlisted student within their credit limit.

    Args:
        student_id: the student dropping.
        course_id: the course.
    """
    _ce_student(state, student_id)
    c = _ce_course(state, course_id)
    if student_id in c["waitlist"]:
        c["waitlist"].remove(student_id)
        return {"student_id": student_id, "course_id": course_id, "status": "left_waitlist", "promoted": None}
    if student_id not in c["enrolled"]:
        raise ToolFailure("not_enrolled", f"{student_id} is not enrolled in {course_id}")
    if student_id in c["grades"]:
        raise ToolFailure("grade_posted", f"{course_id} already has a final grade for {student_id}")
    c["enrolled"].remove(student_id)
    promoted = None
    for wid in list(c["waitlist"]):
        w = state["students"][wid]
        if _ce_load(state, wid) + c["credits"] <= w["max_credits"]:
            c["waitlist"].remove(wid)
            c["enrolled"].append(wid)
            promoted = wid
            break
    return {"student_id": student_id, "course_id": course_id, "status": "dropped", "promoted": promoted}


@tool(effect="write", errors={
    "course_not_found": "unknown course id",
    "not_instructor": "only the course's instructor can post its grades",
    "not_enrolled": "the student is not enrolled in the course",
    "grade_already_posted": "this student's grade is already posted",
})
def post_course_grade(state, instructor_id: str, course_id: str, student_id: str, grade: Grade) -> dict:
    """Post a student's final grade in a course (once); passing grades are added to the student's completed courses.

    Args:
        instructor_id: the instructor posting, e.g. "I-1".
        course_id: the course.
        student_id: an enrolled student.
        grade: the final letter grade.
    """
    c = _ce_course(state, course_id)
    if instructor_id != c["instructor_id"]:
        raise ToolFailure("not_instructor", f"{course_id} is taught by {c['instructor_id']}, not {instructor_id}")
    if student_id not in c["enrolled"]:
        raise ToolFailure("not_enrolled", f"{student_id} is not enrolled in {course_id}")
    if student_id in c["grades"]:
        raise ToolFailure("grade_already_posted", f"{student_id} already has {c['grades'][student_id]} in {course_id}")
    c["grades"][student_id] = grade
    state["students"][student_id]["completed"][course_id] = grade
    return {"course_id": course_id, "student_id": student_id, "grade": grade,
            "passed": grade in state["passing_grades"]}
