"""The top of the zoo's hierarchy (category -> domain -> tool), after Kimi K2's list."""

from toolzoo.spec import Category

CATEGORIES = [
    Category(name="financial_trading", description="brokerage accounts, orders, portfolios, market data"),
    Category(name="smart_home", description="devices, scenes, energy and security in a connected home"),
    Category(name="transportation_logistics", description="shipments, fleets, bookings, routes and warehouses"),
    Category(name="real_estate_property", description="listings, leases, maintenance and viewings"),
    Category(name="software_apps", description="everyday productivity apps: calendars, notes, mail, issue trackers"),
    Category(name="healthcare_medical", description="appointments, prescriptions, records and claims"),
    Category(name="education_elearning", description="courses, enrolment, grading and libraries"),
    Category(name="ecommerce", description="catalogues, carts, orders, returns and loyalty"),
    Category(name="desktop_systems", description="files, processes, packages and settings of a computer"),
    Category(name="robot_control", description="robots, arms, drones and their missions"),
    Category(name="gaming_entertainment", description="games, tickets, streaming and events"),
    Category(name="enterprise_business_intelligence", description="CRM, HR, inventory and reporting"),
]

BY_NAME = {c.name: c for c in CATEGORIES}
