module example.com/perfchecktiny

go 1.26
