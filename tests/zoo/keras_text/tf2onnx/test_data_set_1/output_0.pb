B
Identity:0Jzq>²´€>²&>‹g…>