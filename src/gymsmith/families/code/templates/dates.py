"""Calendar arithmetic on (year, month, day) tuples, without the datetime module."""

DAYS_IN_MONTH = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def is_leap_year(year):
    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)


def days_in_month(year, month):
    if month < 1 or month > 12:
        raise ValueError(f"month out of range: {month}")
    if month == 2 and is_leap_year(year):
        return 29
    return DAYS_IN_MONTH[month - 1]


def day_of_year(year, month, day):
    total = day
    for m in range(1, month):
        total += days_in_month(year, m)
    return total


def add_days(date, n):
    year, month, day = date
    day += n
    while day > days_in_month(year, month):
        day -= days_in_month(year, month)
        month += 1
        if month > 12:
            month = 1
            year += 1
    return (year, month, day)


def days_between(start, end):
    count = 0
    while start < end:
        start = add_days(start, 1)
        count += 1
    return count
